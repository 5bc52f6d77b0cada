// specload's panel in Locust's web UI (served by specload/locust/webui.py).
//
// Locust's React UI offers tables as extension points, not charts or buttons, so this script
// adds what a table cannot show, in plain DOM nodes beside React's own (React never renders
// into them): on the start form, why the user count does not set the load and the step plan
// of the scenario; on every tab, banners that must not be missed; on the specload tab, step k
// of n with the time left, the verdict against the baseline run so far (provisional until the
// run ends), the ratios with their CIs, three live charts and the Report button. Everything
// comes from ./specload/live.json (polled every 2 s, also after the run ends, when Locust
// itself stops polling), ./specload/plan.json and ./specload/runs.json. No library: the
// charts are a few SVG lines, so the page works on a host with no internet access.
(function () {
  "use strict";
  const POLL_MS = 2000;
  const SVG = "http://www.w3.org/2000/svg";
  const state = { view: null, plan: null, planFor: null, runs: null, reportAsked: false };

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") node.textContent = v;
      else if (k === "cls") node.className = v;
      else node.setAttribute(k, v);
    }
    for (const c of children || []) if (c) node.appendChild(c);
    return node;
  }

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    return node;
  }

  function dur(s) {
    if (s === null || s === undefined) return "-";
    s = Math.round(s);
    if (s < 60) return s + " s";
    const m = Math.floor(s / 60);
    return m + " min " + String(s % 60).padStart(2, "0") + " s";
  }

  function ms(v) {
    return v === null || v === undefined ? "-" : (v * 1000).toFixed(2);
  }

  function qps(v) {
    return Number(v).toLocaleString("en", { maximumFractionDigits: 2 });
  }

  async function getJson(url, opts) {
    const r = await fetch(url, Object.assign({ cache: "no-store", credentials: "same-origin" }, opts));
    return { status: r.status, body: await r.json() };
  }

  function currentTab() {
    const q = new URLSearchParams(window.location.search).get("tab");
    if (q) return q;
    const sel = document.querySelector('button[role="tab"][aria-selected="true"]');
    return sel ? sel.textContent.trim().toLowerCase() : null;
  }

  // --- start form ---------------------------------------------------------------------------
  function startForm() {
    const host = document.querySelector('form input[name="host"]');
    return host ? host.closest("form") : null;
  }

  function planBox(plan) {
    const box = el("div", { cls: "specload-plan", "data-testid": "specload-plan" });
    box.appendChild(
      el("p", {
        text:
          "specload sets the load from the scenario: open-loop arrivals, one QPS per step, " +
          "each step a warm-up then a measured window. The user count and ramp-up above do " +
          "not apply (greyed): the user pool is the scenario's max_concurrency. Set the " +
          "scenario, label and an optional baseline run under Custom parameters.",
      })
    );
    if (!plan) return box;
    if (plan.error) {
      box.appendChild(el("p", { cls: "specload-bad", text: "scenario: " + plan.error }));
      return box;
    }
    const head = `${plan.name}: ${plan.steps.length} steps, ${plan.arrival} arrivals, ` +
      `up to ${plan.max_concurrency} requests in flight; the run takes about ${dur(plan.total_s)}`;
    box.appendChild(el("p", { cls: "specload-plan-head", text: head }));
    const rows = plan.steps.map((s) =>
      el("tr", {}, [
        el("td", { text: String(s.index + 1) }),
        el("td", { text: s.concurrency ? `${s.concurrency} in flight` : qps(s.target_qps) }),
        el("td", { text: dur(s.warmup_s) }),
        el("td", { text: dur(s.duration_s) }),
        el("td", { text: String(s.repeat) }),
      ])
    );
    const headRow = el("tr", {}, ["Step", "Target QPS", "Warm-up", "Measured", "Repeat"].map(
      (t) => el("th", { text: t })
    ));
    box.appendChild(el("table", { cls: "specload-table" }, [el("thead", {}, [headRow]), el("tbody", {}, rows)]));
    return box;
  }

  async function tendStartForm() {
    const form = startForm();
    if (!form) return;
    const input = form.querySelector('input[name="scenario"]');
    const scenario = input ? input.value : null;
    if (scenario !== state.planFor) {
      state.planFor = scenario;
      const url = "./specload/plan.json" + (scenario !== null ? "?scenario=" + encodeURIComponent(scenario) : "");
      state.plan = (await getJson(url)).body;
    }
    const old = form.querySelector(".specload-plan");
    const fresh = planBox(state.plan);
    if (!old) form.insertBefore(fresh, form.firstChild);
    else if (old.textContent !== fresh.textContent) old.replaceWith(fresh);
    const baseline = form.querySelector('input[name="baselineRun"]');
    if (baseline && !document.getElementById("specload-runs")) {
      if (state.runs === null) state.runs = (await getJson("./specload/runs.json")).body.runs;
      const list = el("datalist", { id: "specload-runs" }, state.runs.map((r) =>
        el("option", { value: r.path, label: `${r.label} · ${r.scenario || ""} · ${r.status}` })
      ));
      document.body.appendChild(list);
      baseline.setAttribute("list", "specload-runs");
      baseline.setAttribute("placeholder", state.runs.length ? "choose a finished run" : "a finished run dir");
    }
  }

  // --- banners (every tab) ------------------------------------------------------------------
  function tendBanners(view) {
    const main = document.querySelector("main");
    if (!main) return;
    let strip = document.getElementById("specload-banners");
    const banners = (view && view.banners) || [];
    const text = JSON.stringify(banners);
    if (strip && strip.dataset.content === text && strip.parentElement === main) return;
    if (strip) strip.remove();
    if (!banners.length) return;
    strip = el("div", { id: "specload-banners", "data-testid": "specload-banners" },
      banners.map((b) => el("div", { cls: "specload-banner specload-" + b.kind, role: "alert", text: b.text })));
    strip.dataset.content = text;
    main.insertBefore(strip, main.firstChild);
  }

  // --- the specload tab's panel -------------------------------------------------------------
  function clockLine(view) {
    const run = view.run;
    if (!run) return "Not started: press Start. The scenario sets the load (see the start form).";
    if (run.finished)
      return `Run ${run.status}: ${run.recorded} requests recorded in ${run.run_dir}`;
    if (run.step_now === null || run.step_now === undefined) {
      if (run.time_left_run_s !== null && run.time_left_run_s !== undefined)
        return `Starting: the run takes about ${dur(run.time_left_run_s)}`;
      return "Preparing the prompts and the workers…";
    }
    const step = view.steps.find((s) => s.index === run.step_now) || {};
    return `Step ${run.step_now + 1} of ${run.total_steps} · ${qps(step.target_qps)} req/s` +
      (step.state === "warm-up" ? " (warm-up)" : "") +
      ` · ${dur(run.time_left_step_s)} left in this step · ${dur(run.time_left_run_s)} left in the run`;
  }

  function ratioCell(c, effects) {
    if (!c || c.value === null || c.value === undefined) return el("td", { text: "-" });
    const text = c.text || "-";  // the change and its CI as the report's per-step tables write them
    const words = (effects || {})[c.effect] || c.effect;  // the rule's words, sent by the server
    return el("td", { cls: "specload-" + c.effect, title: words, "data-effect": c.effect, text });
  }

  function ratioTable(cmp) {
    const cols = [["tpot_p50", "TPOT p50"], ["tpot_p95", "TPOT p95"], ["ttft_p50", "TTFT p50"], ["e2e_p50", "E2E p50"]];
    const head = el("tr", {}, [el("th", { text: "Load (req/s)" }), ...cols.map(([, t]) => el("th", { text: t }))]);
    const rows = cmp.ratios.map((r) =>
      el("tr", { "data-qps": String(r.target_qps) }, [el("td", { text: qps(r.target_qps) }), ...cols.map(([k]) => ratioCell(r[k], cmp.effects))])
    );
    return el("table", { cls: "specload-table", "data-testid": "specload-ratios" }, [el("thead", {}, [head]), el("tbody", {}, rows)]);
  }

  function crossoverLine(x) {
    if (!x) return null;
    if (x.qps === null || x.qps === undefined) return null;
    const ci = x.ci_text ? ` (95 % CI ${x.ci_text})` : "";  // worded by the server
    return el("p", { cls: "specload-crossover", "data-testid": "specload-crossover",
      text: `Crossover so far: about ${qps(x.qps)} req/s${ci}` });
  }

  function verdictBox(view) {
    const cmp = view.compare;
    const box = el("div", { cls: "specload-verdict", "data-testid": "specload-verdict" });
    const run = view.run || {};
    if (!cmp) {
      box.appendChild(el("p", { text: "No baseline run: start with --baseline-run DIR (or the form's baseline_run) to see this run's ratios to it live." }));
    } else {
      const n = cmp.compared_steps.length;
      const total = run.total_steps || n;
      const tag = cmp.provisional ? `PROVISIONAL · ${n} of ${total} steps compared` :
        (cmp.failure ? "FINAL · no comparison" : `FINAL · ${n} of ${total} steps compared`);
      const tone = cmp.provisional ? "specload-provisional" : (cmp.failure ? "specload-none" : "specload-final");
      box.appendChild(el("div", { cls: "specload-tag " + tone,
        "data-testid": "specload-verdict-tag", text: tag }));
      box.appendChild(el("p", { cls: "specload-against", text: `${run.label || "this run"} against ${cmp.baseline.label} (${cmp.baseline.path})` }));
      let sentence = cmp.verdict;
      if (!sentence) sentence = cmp.problem ? "No comparison (see the banner above)." :
        "No step has settled yet: the first ratios appear when step 1 ends and its requests have returned.";
      box.appendChild(el("p", { cls: "specload-sentence", "data-testid": "specload-verdict-text", text: sentence }));
      const x = crossoverLine(cmp.crossover);
      if (x) box.appendChild(x);
      if (cmp.computing) box.appendChild(el("p", { cls: "specload-muted", text: "comparing the settled steps…" }));
      if (cmp.ratios.length) {
        box.appendChild(ratioTable(cmp));
        box.appendChild(el("p", { cls: "specload-muted",
          text: "Change = this run / baseline − 1 (negative: lower than the baseline), 95 % CI in brackets, coloured by the rule of specload compare: " + (cmp.rule || "") }));
      }
    }
    box.appendChild(reportLine(view));
    return box;
  }

  function reportLine(view) {
    const run = view.run || {};
    const rep = view.report || { state: "none" };
    const line = el("div", { cls: "specload-report" });
    const button = el("button", { type: "button", cls: "specload-button", "data-testid": "specload-report-button", text: "Report" });
    if (!run.finished) {
      button.disabled = true;
      button.title = "available when the run has ended";
    }
    if (rep.state === "running") button.disabled = true;
    button.addEventListener("click", askReport);
    line.appendChild(button);
    if (rep.state === "running") line.appendChild(el("span", { text: " writing the report…" }));
    if (rep.state === "ready") {
      line.appendChild(el("a", { href: "./specload/report/report.html", target: "_blank",
        "data-testid": "specload-report-link", text: " open report.html" }));
      line.appendChild(el("span", { cls: "specload-muted", text: " " + rep.path }));
    }
    return line;
  }

  async function askReport() {
    state.reportAsked = true;
    await getJson("./specload/report", { method: "POST" });
    tick();
  }

  // Round tick values: 1, 2 or 5 times a power of ten, about four of them up to ``max``.
  function ticks(max) {
    const raw = max / 4;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
    const out = [];
    for (let v = 0; ; v += step) {
      out.push(Number(v.toPrecision(6)));
      if (v >= max * (1 - 1e-9)) return out; // the last tick is at or above the largest value
    }
  }

  function tickText(v) {
    return Math.abs(v) >= 10 || v === 0 ? v.toFixed(0) : String(Number(v.toPrecision(2)));
  }

  // A line chart of points {x, y}: series [{name, points, dash, cls}], axes from 0, the
  // legend to the right of the plot.
  function chart(title, testid, series, yLabel) {
    const W = 420, H = 220, L = 46, R = 118, T = 24, B = 34;
    const pts = series.flatMap((s) => s.points);
    const xTicks = ticks(Math.max(1, ...pts.map((p) => p.x)));
    const yTicks = ticks(Math.max(1e-6, ...pts.map((p) => p.y)));
    const xMax = xTicks[xTicks.length - 1], yMax = yTicks[yTicks.length - 1];
    const X = (x) => L + (x / xMax) * (W - L - R), Y = (y) => H - B - (y / yMax) * (H - T - B);
    const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "specload-chart", "data-testid": testid, role: "img" });
    const label = (x, y, text, attrs) => {
      const node = svg("text", Object.assign({ x, y, class: "specload-tick" }, attrs || {}));
      node.textContent = text;
      g.appendChild(node);
    };
    label(L, 15, title, { class: "specload-chart-title" });
    for (const v of yTicks) {
      g.appendChild(svg("line", { x1: L, y1: Y(v), x2: W - R, y2: Y(v), class: "specload-grid" }));
      label(L - 4, Y(v) + 3, tickText(v), { "text-anchor": "end" });
    }
    for (const v of xTicks) label(X(v), H - B + 13, tickText(v), { "text-anchor": "middle" });
    g.appendChild(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "specload-axis" }));
    g.appendChild(svg("line", { x1: L, y1: T, x2: L, y2: H - B, class: "specload-axis" }));
    label((L + W - R) / 2, H - 4, "target load (req/s)", { "text-anchor": "middle" });
    const mid = (T + H - B) / 2;
    label(10, mid, yLabel, { transform: `rotate(-90 10 ${mid})`, "text-anchor": "middle" });
    series.forEach((s, i) => {
      const sorted = [...s.points].sort((a, b) => a.x - b.x);
      const dash = s.dash ? "5 4" : "none";
      if (sorted.length > 1)
        g.appendChild(svg("polyline", { points: sorted.map((p) => `${X(p.x)},${Y(p.y)}`).join(" "),
          class: "specload-line " + s.cls, "stroke-dasharray": dash }));
      for (const p of sorted)
        g.appendChild(svg("circle", { cx: X(p.x), cy: Y(p.y), r: 3, "data-series": s.name,
          class: "specload-dot " + s.cls + (p.open ? " specload-open" : "") }));
      const ly = T + 8 + i * 15, lx = W - R + 10;
      g.appendChild(svg("line", { x1: lx, y1: ly, x2: lx + 18, y2: ly, class: "specload-line " + s.cls, "stroke-dasharray": dash }));
      label(lx + 22, ly + 3, s.name);
    });
    return g;
  }

  function latencySeries(view, key) {
    const cmp = view.compare;
    // closed-loop steps ({concurrency: N}) have no target load: they are not on a load axis
    const mine = view.steps.filter((s) => !s.concurrency && s[key + "_s"] && s[key + "_s"].p50 !== null && s.state !== "next" && s.state !== "warm-up");
    const pts = (q) => mine.map((s) => ({ x: s.target_qps, y: s[key + "_s"][q] * 1000, open: s.state !== "done" }));
    const series = [
      { name: "this run p50", points: pts("p50"), cls: "specload-this" },
      { name: "this run p95", points: pts("p95"), cls: "specload-this", dash: true },
    ];
    if (cmp && cmp.baseline_steps.length) {
      const b = (m) => cmp.baseline_steps.filter((s) => s[m] !== null).map((s) => ({ x: s.target_qps, y: s[m] * 1000 }));
      series.push({ name: "baseline p50", points: b(key + "_p50"), cls: "specload-base" });
      series.push({ name: "baseline p95", points: b(key + "_p95"), cls: "specload-base", dash: true });
    }
    return series;
  }

  function qpsChart(view) {
    const done = view.steps.filter((s) => !s.concurrency && s.achieved_qps !== null && s.achieved_qps !== undefined);
    const series = [{ name: "achieved", cls: "specload-this",
      points: done.map((s) => ({ x: s.target_qps, y: s.achieved_qps, open: s.state !== "done" })) }];
    const top = Math.max(1, ...view.steps.map((s) => s.target_qps));
    series.push({ name: "target", cls: "specload-base", dash: true, points: [{ x: 0, y: 0 }, { x: top, y: top }] });
    return chart("Achieved vs target QPS", "specload-chart-qps", series, "req/s");
  }

  function charts(view) {
    return el("div", { cls: "specload-charts" }, [
      chart("TPOT by load (ms)", "specload-chart-tpot", latencySeries(view, "tpot"), "ms"),
      chart("TTFT by load (ms)", "specload-chart-ttft", latencySeries(view, "ttft"), "ms"),
      qpsChart(view),
    ]);
  }

  function panel(view) {
    const stale = view.run && view.run.finished ?
      el("div", { cls: "specload-muted", text: "Locust stops refreshing its table below when a run ends: reload the page for the table's final figures (this panel stays current)." }) : null;
    return el("div", { id: "specload-panel", "data-testid": "specload-panel" }, [
      el("div", { cls: "specload-clock", "data-testid": "specload-clock", text: clockLine(view) }),
      stale,
      verdictBox(view),
      charts(view),
    ]);
  }

  function tendPanel(view) {
    const old = document.getElementById("specload-panel");
    if (currentTab() !== "specload" || !view) {
      if (old) old.remove();
      return;
    }
    const table = document.querySelector("main .MuiTableContainer-root");
    const fresh = panel(view);
    if (old && old.nextElementSibling === table) old.replaceWith(fresh);
    else {
      if (old) old.remove();
      if (table && table.parentElement) table.parentElement.insertBefore(fresh, table);
    }
  }

  async function tick() {
    try {
      state.view = (await getJson("./specload/live.json")).body;
    } catch (e) {
      return; // the master is gone or restarting: try again at the next tick
    }
    tendBanners(state.view);
    tendPanel(state.view);
  }

  setInterval(tick, POLL_MS);
  setInterval(() => tendStartForm().catch(() => {}), 1000);
  // re-draw at once when the user switches tabs (React re-renders the table container)
  document.addEventListener("click", () => setTimeout(() => tendPanel(state.view), 50));
  tick();
})();
