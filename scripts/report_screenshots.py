"""Screenshots of the demo report for docs/report.md, taken with headless Chromium.

    python scripts/report_screenshots.py [--html REPORT.html] [--out-dir docs/images]
                                         [--demo-out runs/demo-screens] [--plots 6]

Without ``--html`` it first runs ``specload demo --out runs/demo-screens`` (a few minutes)
and uses that report. The page is opened at 1280x900, device scale 1, as a reader's laptop
would show it. It fails (exit 1, naming the widest element) when anything makes the page
wider than the window, then writes three PNGs:

- ``report-top.png``: title, verdicts, the rule, findings, recommendations;
- ``report-tables.png``: the status and boundaries table, then the per-step change tables
  with their coloured cells (the sections between them are left out of the picture, and a
  line in the picture says so);
- ``report-plots.png``: the plots section, its first ``--plots`` figures.

Browser as in tests/browser.py: Debian's ``/usr/bin/chromium`` driven by Playwright
(``apt-get install -y chromium`` when missing). ``make screenshots`` runs this script.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# the browser and flags the browser tests use (one definition; pytest is a dev dependency)
from tests.browser import ARGS, CHROMIUM

WIDTH, HEIGHT = 1280, 900
MAX_BYTES = 1_000_000
#: white space kept around a cropped region, px
PAD = 12

# Widest element when the page overflows: the one reaching furthest right, described by tag,
# id/class, a little of its text and the heading above it.
_OVERFLOW_JS = """() => {
  const de = document.documentElement;
  const out = {scrollWidth: de.scrollWidth, clientWidth: de.clientWidth, widest: null};
  if (de.scrollWidth <= de.clientWidth) return out;
  // how far right each element reaches, its overflowing content included, unless something
  // around it clips or scrolls; on a tie the innermost (later in document order) wins
  const clips = e => getComputedStyle(e).overflowX !== 'visible';
  let best = null, right = -1;
  for (const e of document.body.querySelectorAll('*')) {
    let a = e.parentElement, clipped = false;
    for (; a && a !== document.body; a = a.parentElement) if (clips(a)) { clipped = true; break; }
    if (clipped) continue;
    const q = e.getBoundingClientRect();
    const r = clips(e) ? q.right : Math.max(q.right, q.left + e.scrollWidth);
    if (r >= right) { right = r; best = e; }
  }
  let h = best, heading = '';
  while (h && !heading) {
    let s = h.previousElementSibling;
    while (s && !/^H[1-6]$/.test(s.tagName)) s = s.previousElementSibling;
    if (s) heading = s.textContent; else h = h.parentElement;
  }
  out.widest = {tag: best.tagName.toLowerCase(), id: best.id, cls: best.className,
                right: Math.round(right), width: Math.round(best.getBoundingClientRect().width),
                text: (best.textContent || '').trim().slice(0, 80), heading: heading.slice(0, 80)};
  return out;
}"""

# Page coordinates of the regions to crop: {name: {left, top, right, bottom}} or {error: ...}.
# With hide=true (the tables picture) it first hides what lies between the status table and
# the change tables and puts a line saying so in their place; the page is changed for good,
# so that one is taken last.
_REGIONS_JS = """([nplots, hide]) => {
  const kids = [...document.body.children];
  const text = e => (e.textContent || '').trim();
  const isHeading = e => /^H[1-6]$/.test(e.tagName);
  const box = els => {
    let l = 1e9, t = 1e9, r = -1e9, b = -1e9;
    for (const e of els) {
      const q = e.getBoundingClientRect();
      if (q.width === 0 && q.height === 0) continue;
      l = Math.min(l, q.left); t = Math.min(t, q.top); b = Math.max(b, q.bottom);
      if (isHeading(e)) continue;  // full width (its rule too): the content sets the right edge
      // a table or a row of figures sits in a full-width div: its own right edge, not the div's
      const inner = e.matches('div.scroll, div.plots') ? [...e.querySelectorAll('table, figure')] : [e];
      for (const x of inner) r = Math.max(r, x.getBoundingClientRect().right);
    }
    return {left: l + scrollX, top: t + scrollY, right: r + scrollX, bottom: b + scrollY};
  };
  if (!hide) {
    // top: from the title to the end of the recommendations (or the findings)
    const top = [];
    for (const e of kids) {
      if (isHeading(e) && e.tagName !== 'H1' && text(e) !== 'Recommendations') break;
      top.push(e);
    }
    // plots: the heading and the first nplots figures
    const h = kids.findIndex(e => e.tagName === 'H2' && text(e) === 'Plots');
    if (h < 0 || !kids[h + 1] || !kids[h + 1].matches('div.plots'))
      return {error: "no Plots section (h2 'Plots' followed by div.plots)"};
    const figs = [...kids[h + 1].querySelectorAll('figure')].slice(0, nplots);
    if (!figs.length) return {error: 'the Plots section has no figure'};
    return {top: box(top), plots: box([kids[h], ...figs])};
  }
  // the status table: its heading, the table, its note
  const status = kids.findIndex(e => isHeading(e) && text(e).startsWith('Where each condition helps'));
  if (status < 0) return {error: "no status and boundaries table ('Where each condition helps ...')"};
  let end = status + 1;
  while (end < kids.length && !isHeading(kids[end])) end++;
  const statusEls = kids.slice(status, end);
  // the change tables: section 'Change against the baseline' up to the next h2
  const change = kids.findIndex(e => e.tagName === 'H2' && text(e) === 'Change against the baseline');
  if (change < 0) return {error: "no section 'Change against the baseline'"};
  let changeEnd = change + 1;
  while (changeEnd < kids.length && kids[changeEnd].tagName !== 'H2') changeEnd++;
  const between = kids.slice(end, change);
  if (between.length) {
    const names = between.filter(e => e.tagName === 'H2').map(text);
    for (const e of between) e.style.display = 'none';
    const p = document.createElement('p');
    p.className = 'note';
    p.style.cssText = 'text-align:center;border-top:1px dashed #bbb;border-bottom:1px dashed #bbb;padding:.3em 0';
    p.textContent = '\u22ef left out of this picture: ' + (names.join(', ') || 'other sections') + ' \u22ef';
    document.body.insertBefore(p, kids[change]);
    statusEls.push(p);
  }
  return {tables: box([...statusEls, ...kids.slice(change, changeEnd)])};
}"""


def find_chromium() -> str:
    """The system Chromium, installed with apt-get when missing (as tests/browser.py does)."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    print("chromium is missing: apt-get install -y chromium", file=sys.stderr)
    proc = subprocess.run(
        ["apt-get", "install", "-y", "chromium"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0 or not Path(CHROMIUM).exists():
        sys.exit(f"error: could not install chromium: {proc.stderr.strip()[-500:]}")
    return CHROMIUM


def run_demo(out: Path) -> Path:
    """``specload demo --out OUT``; the path of its report.html."""
    cmd = [sys.executable, "-m", "specload", "demo", "--out", str(out)]
    print("running", " ".join(cmd), "(a few minutes)", file=sys.stderr)
    proc = subprocess.run(cmd, cwd=REPO, check=False)
    html = out / "report" / "report.html"
    # the demo exits 1 when a gate fails; the report is still written
    if proc.returncode not in (0, 1) or not html.exists():
        sys.exit(f"error: specload demo exited {proc.returncode} without {html}")
    return html


def _describe(w: dict[str, Any]) -> str:
    name = w["tag"] + (f"#{w['id']}" if w["id"] else "") + (f".{w['cls']}" if w["cls"] else "")
    return (
        f"<{name}> reaches x={w['right']} px (width {w['width']} px)"
        + (f" under the heading '{w['heading']}'" if w["heading"] else "")
        + (f", text '{w['text']}'" if w["text"] else "")
    )


def _clip(r: dict[str, float]) -> dict[str, float]:
    left = max(0.0, r["left"] - PAD)
    right = min(float(WIDTH), r["right"] + PAD)
    top = max(0.0, r["top"] - PAD)
    return {"x": left, "y": top, "width": right - left, "height": r["bottom"] + PAD - top}


def _save(png: bytes, path: Path) -> int:
    """Write the PNG, re-encoded smaller (lossless) when Pillow is there; its size."""
    try:
        from PIL import Image

        buf = io.BytesIO()
        Image.open(io.BytesIO(png)).save(buf, format="PNG", optimize=True)
        if len(buf.getvalue()) < len(png):
            png = buf.getvalue()
    except ImportError:
        pass
    path.write_bytes(png)
    return len(png)


def screenshots(html: Path, out_dir: Path, nplots: int) -> list[Path]:
    from playwright.sync_api import sync_playwright

    exe = find_chromium()
    out_dir.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    written: list[Path] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=ARGS, headless=True)
        try:
            page = browser.new_page(
                viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=1
            )
            page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
            page.on(
                "console",
                lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None,
            )
            page.goto(html.resolve().as_uri(), wait_until="load")
            layout = page.evaluate(_OVERFLOW_JS)
            if layout["widest"] is not None:
                sys.exit(
                    f"error: {html} overflows a {WIDTH} px window: the page is "
                    f"{layout['scrollWidth']} px wide for {layout['clientWidth']} px; widest: "
                    + _describe(layout["widest"])
                )
            if errors:
                sys.exit(f"error: {html}: " + "; ".join(errors))
            regions = page.evaluate(_REGIONS_JS, [nplots, False])
            if "error" not in regions:
                shots = {
                    n: page.screenshot(full_page=True, clip=_clip(regions[n]))
                    for n in ("top", "plots")
                }
                regions.update(page.evaluate(_REGIONS_JS, [nplots, True]))
            if "error" in regions:
                sys.exit(f"error: {html}: {regions['error']}")
            # hiding sections for the tables picture must not have widened anything
            after = page.evaluate(_OVERFLOW_JS)
            if after["widest"] is not None:
                sys.exit(f"error: {html} overflows: " + _describe(after["widest"]))
            shots["tables"] = page.screenshot(full_page=True, clip=_clip(regions["tables"]))
            for name in ("top", "tables", "plots"):
                path = out_dir / f"report-{name}.png"
                size = _save(shots[name], path)
                clip = _clip(regions[name])
                print(f"{path}: {clip['width']:.0f}x{clip['height']:.0f} px, {size / 1e3:.0f} kB")
                if size > MAX_BYTES:
                    sys.exit(
                        f"error: {path} is {size / 1e6:.1f} MB (limit {MAX_BYTES / 1e6:.0f} MB)"
                    )
                written.append(path)
        finally:
            browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--html", type=Path, help="an existing report.html (default: run the demo)")
    ap.add_argument("--out-dir", type=Path, default=REPO / "docs" / "images")
    ap.add_argument(
        "--demo-out",
        type=Path,
        default=REPO / "runs" / "demo-screens",
        help="where the demo goes when --html is not given (replaced)",
    )
    ap.add_argument("--plots", type=int, default=6, help="figures in the plots picture (default 6)")
    args = ap.parse_args(argv)
    if args.html is not None and not args.html.is_file():
        sys.exit(f"error: no such file: {args.html}")
    html = args.html if args.html is not None else run_demo(args.demo_out)
    screenshots(html, args.out_dir, args.plots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
