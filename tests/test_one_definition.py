"""One concept, one definition: a second copy of a rule drifts (it already did, twice).

Checked on the source, so a new copy fails here before it reaches a user:
- run.json is parsed in ``specload/recorder/run_json.py`` only (``load_run_json`` for a run
  to use, ``peek_run_json`` for one that may not be a run yet);
- report.json is parsed as data in ``specload/report/report_json.py`` only (``read_report``);
- the help/hurt rule's words and the CI wording come from ``report/wording.py`` and
  ``analysis/statistics/effect.py``: no other module spells out how long would decide a step, and the web
  UI shows the words the server sends;
- the rule's threshold is applied in ``analysis/statistics/effect.py`` only: no other module compares a
  ratio with ``min_gain``;
- steps.json is parsed in ``specload/recorder/steps_json.py`` only, which also says where a
  step's measured window starts and ends;
- a step is named by ``report/wording.py`` (``step_name``, ``step_label``) only;
- a percentile is computed by ``analysis/statistics/stats.py`` only;
- what a client takes besides its URL is ``client.ClientSettings``: no client's constructor
  names a setting itself;
- no analysis module builds a sentence (the run readers, the output contract, the features'
  conflicts, the schedules' notes and verdicts, the regimes' steps, why a step is
  incomplete, the gates' skipped steps, the attribution): they return facts and ``report/``
  words them; only raised errors and docstrings speak. The host differences too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "specload"
PARSE = re.compile(r"(read_text|read_bytes|open\(|loads\()")


def _lines(skip: tuple[str, ...]) -> list[tuple[str, int, str]]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = str(path.relative_to(PKG))
        if rel.startswith(skip):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            out.append((rel, n, line))
    return out


def _hits(pattern: str, skip: tuple[str, ...] = (), under: str = "") -> list[str]:
    """``file:line: text`` of each line of ``specload/`` (files under ``under``, those in
    ``skip`` left out) that ``pattern`` matches: the places a second definition hides."""
    return [
        f"{rel}:{n}: {line.strip()}"
        for rel, n, line in _lines(skip)
        if rel.startswith(under) and re.search(pattern, line)
    ]


def test_run_json_is_parsed_by_the_one_reader_only() -> None:
    bad = [
        f"{rel}:{n}: {line.strip()}"
        for rel, n, line in _lines(("recorder/run_json.py",))
        if '"run.json"' in line and PARSE.search(line)
    ]
    assert not bad, "parse run.json with recorder.run_json (load_run_json/peek_run_json):\n" + (
        "\n".join(bad)
    )


def _names_report_json(node: ast.AST) -> bool:
    """``node`` names a report.json: the file's name as a string, or a name, argument or
    attribute called ``report_json`` / ``REPORT_JSON``."""
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and n.value == "report.json":
            return True
        name = (
            n.id
            if isinstance(n, ast.Name)
            else n.arg
            if isinstance(n, ast.arg)
            else n.attr
            if isinstance(n, ast.Attribute)
            else ""
        )
        if name.lower() == "report_json":
            return True
    return False


def _json_parses(node: ast.AST) -> list[int]:
    """Lines of ``node`` that call a JSON parser (``json.load``, ``json.loads``,
    ``orjson.loads``, a bare ``loads``)."""
    out = []
    for n in ast.walk(node):
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if (
            isinstance(f, ast.Attribute)
            and f.attr in ("load", "loads")
            and isinstance(f.value, ast.Name)
            and "json" in f.value.id
        ) or (isinstance(f, ast.Name) and f.id == "loads"):
            out.append(n.lineno)
    return out


def test_report_json_is_parsed_by_the_one_reader_only() -> None:
    # The live comparison and a sweep's last lines each read report.json as a raw dict with
    # their own ``.get`` chains; they read it typed with ``report.report_json.read_report``.
    # A function (or module body) that names a report.json and calls a JSON parser is a
    # second reader.
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = str(path.relative_to(PKG))
        if rel == "report/report_json.py":
            continue
        tree = ast.parse(path.read_text())
        scopes: list[ast.AST] = [
            n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        ]
        top = ast.Module(
            body=[n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.ClassDef)],
            type_ignores=[],
        )
        for scope in [top, *scopes]:
            if _names_report_json(scope):
                bad += [f"{rel}:{line}" for line in _json_parses(scope)]
    assert not bad, "read report.json with report.report_json.read_report: " + ", ".join(
        sorted(set(bad))
    )


def test_steps_json_is_parsed_and_windowed_by_the_one_reader_only() -> None:
    skip = ("recorder/steps_json.py",)
    parsed = [x for x in _hits(r'"steps\.json"|STEPS_JSON', skip) if PARSE.search(x)]
    windowed = _hits(r"warmup_end.*\bor\b.*start|warmup_end.*else.*\"start\"", skip)
    bad = parsed + windowed
    assert not bad, "read steps.json with recorder.steps_json (read_steps, measured_window):\n" + (
        "\n".join(bad)
    )


def test_a_step_is_named_by_wording_only() -> None:
    # "c=8", "concurrency 8", "8 req/s": five modules had their own; sim/ is a product of its
    # own and names no step.
    bad = _hits(r'f"c=\{|f".*concurrency \{', ("report/wording.py", "sim/"))
    assert not bad, f"name steps with report.wording.step_name: {bad}"


def test_a_percentile_is_computed_by_stats_only() -> None:
    # numpy's linear percentile, live or in a report: ``stats.quantile_sorted`` (and the
    # bootstrap replicates' interval, ``stats.percentile_ci``). Four modules had their own
    # (live.percentile, crossover.boundary_ci, quality.py's np.percentile); sim/ is a product
    # of its own. Prometheus's histogram_quantile (metrics/histogram.py) interpolates within
    # bucket counts, the server's own quantile, a different thing.
    skip = ("analysis/statistics/stats.py", "sim/", "metrics/histogram.py")
    bad = _hits(r"np\.(nan)?(percentile|quantile)\(|statistics\.quantiles\(", skip)
    bad += _hits(r"def \w*(percentile|quantile)\w*\(", skip)
    assert not bad, f"use stats.quantile_sorted / stats.percentile_ci: {bad}"


def test_the_facts_analysis_returns_carry_no_sentences() -> None:
    # The regime reading, the gates, the findings, the verdict and the classes' split once
    # wrote their own sentences in analysis/; report/ words them now (regime_words,
    # gate_words, finding_words, verdict_words).
    pattern = r"def (message|passed_message|passed_lines|clause|sentences?|headline|verdicts?)\("
    bad = _hits(pattern, under="analysis/")
    assert not bad, f"word analysis' facts in report/: {bad}"


def test_specload_starts_itself_through_one_argv_builder() -> None:
    # ``specload run`` was spelled out in four places, each with its own copy of the flags
    # every child needs; a flag added to one was missing from the others.
    bad = _hits(r'"specload",\s*"(run|compare|sweep)"|"-m",\s*"specload"', ("protocol/argv.py",))
    assert not bad, f"build specload's own command lines with protocol.argv: {bad}"


def test_the_rules_undecided_words_are_written_once() -> None:
    bad = [
        f"{rel}:{n}"
        for rel, n, line in _lines(("report/wording.py", "analysis/statistics/effect.py"))
        if re.search(r"[\"'][^\"']*would likely decide|[\"']no significant change", line)
    ]
    assert not bad, f"use analysis.statistics.effect / report.wording for the rule's words: {bad}"


#: Sentences about the analysis's facts, written in report/ only: the analysis returns
#: dataclasses and numbers, report/ writes every sentence.
REPORT_WORDS = (
    "qps_text", "ci_text", "steps_text", "split_text", "versus_text", "lockstep_warnings",
    "effect_text", "rule_text",
)  # fmt: skip


def test_the_analysis_defines_none_of_the_reports_words() -> None:
    # Boundary.qps_text, Crossover.split_text, versus_text, ClosedLoop.lockstep_warnings,
    # effect_text ... were sentences written under analysis/: they are report/'s
    # (crossover_words, capacity_words, compare_words, rule_words), one definition each
    import ast

    bad = [
        f"{p.relative_to(PKG)}:{node.lineno}: {node.name}"
        for p in sorted((PKG / "analysis").rglob("*.py"))
        for node in ast.walk(ast.parse(p.read_text(), filename=str(p)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in REPORT_WORDS
    ]
    assert not bad, f"word these in specload/report/, from the analysis's facts: {bad}"
    found = {
        node.name
        for p in (PKG / "report").rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.FunctionDef)
    }
    # guards the guard: a renamed report function would leave the names above unchecked
    assert not set(REPORT_WORDS) - found, f"report/ no longer defines {set(REPORT_WORDS) - found}"


#: Where analysis/ still writes warning or note sentences, not yet facts: none.
SENTENCES_LEFT: tuple[str, ...] = ()
#: ``warnings.append(f"...`` / ``notes += [f"...`` / ``errors.append(f"...`` and the like: a
#: sentence built in place.
SENTENCE = r"\b(warnings|notes|errors)(\.append\(|\s*\+?=\s*\[)\s*f[\"']"


def test_the_comparison_s_warnings_and_notes_are_facts_worded_in_report() -> None:
    # compare.py built Comparison.warnings and .notes from ~20 English f-strings: they are
    # facts (analysis/comparison.py's CompareWarning, CompareNote) that report/compare_words.py
    # words, once for every output
    import ast

    bad = _hits(SENTENCE, skip=SENTENCES_LEFT, under="analysis/")
    assert not bad, f"return a fact; word it in report/compare_words.py: {bad}"
    tree = ast.parse((PKG / "analysis" / "compare.py").read_text())
    builders = {
        node.name: node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and ("warning" in node.name or "note" in node.name)
    }
    # guards the guard: the builders renamed would leave nothing checked
    assert {"_notes", "_client_warnings", "_warmup_warnings", "_telemetry_warnings"} <= set(
        builders
    )
    worded = [
        f"analysis/compare.py:{n.lineno}: {name}"
        for name, fn in builders.items()
        for n in ast.walk(fn)
        if isinstance(n, ast.JoinedStr)
    ]
    assert not worded, f"the comparison's warnings and notes are facts: {worded}"


#: Where a sentence built from the figures was returned as data outside analysis/ (all of
#: which the check below covers): the host differences (``metrics/host.py``).
FACT_FUNCTIONS: dict[str, set[str] | None] = {"metrics/host.py": {"host_differences"}}
#: The error for runs that are not comparable: raised (``ConfigError``), never returned.
ERROR_TEXT = {"key_differences", "_format_line", "not_comparable_message"}
#: Labels and keys analysis/ returns that read as two words but name a thing, as
#: ``effect.HELPS`` does: report.json carries them as values, report/ words them. By module,
#: the constant or function that defines them.
LABELS = {
    "analysis/inputs/comparable.py": {"PROMPT_KEY"},  # the prompt-length key of a difference
    "analysis/decisions/classes.py": {"class_masks"},  # a class of turns: "turn 2"
    "analysis/diagnostics/regime_model.py": {
        "CAUSE_LOADGEN", "CAUSE_THROTTLED", "CAUSE_HOST_BOUND", "CAUSE_GPU_IDLE",
    },
}  # fmt: skip
#: Two words in a string's text: a sentence, not a key such as ``f"target.{k}"``. An
#: f-string's placeholders count as words (``f"{cond} at {qps:g} req/s"`` is a sentence).
WORDS = re.compile(r"[A-Za-z]{2,} [A-Za-z]{2,}")


def _allowed(tree: ast.Module, rel: str, only: set[str] | None) -> set[int]:
    """Ids of the nodes whose strings may be words: docstrings (every bare string
    statement), ``raise`` statements and ``ConfigError(...)`` (errors a person reads),
    f-strings' parts (the f-string is checked whole), the not-comparable error, the labels
    in ``LABELS`` and, when ``only`` is given, everything outside those functions."""
    named = ERROR_TEXT | LABELS.get(rel, set())
    keep: list[ast.AST] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant):
            keep.append(n)
        elif isinstance(n, ast.Raise | ast.JoinedStr):
            keep += [n] if isinstance(n, ast.Raise) else n.values
        elif isinstance(n, ast.Call) and getattr(n.func, "id", "") == "ConfigError":
            keep.append(n)
        elif isinstance(n, ast.FunctionDef) and n.name in named:
            keep.append(n)
        elif isinstance(n, ast.Assign) and {getattr(t, "id", "") for t in n.targets} & named:
            keep.append(n)
    allowed = {id(x) for k in keep for x in ast.walk(k)}
    if only is not None:
        inside = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in only]
        checked = {id(x) for fn in inside for x in ast.walk(fn)}
        allowed |= {id(x) for x in ast.walk(tree) if id(x) not in checked}
    return allowed


def _text(n: ast.Constant | ast.JoinedStr) -> str:
    """A string's text; an f-string's placeholders as a word."""
    if isinstance(n, ast.Constant):
        return n.value if isinstance(n.value, str) else ""
    return "".join(v.value if isinstance(v, ast.Constant) else "xx" for v in n.values)


def _sentences(rel: str, only: set[str] | None = None, source: str | None = None) -> list[str]:
    """``rel:line: text`` of each string of words in ``rel`` (in its functions named in
    ``only`` when given; ``source`` instead of the file's text): module, class and function
    level alike, what ``_allowed`` allows left out."""
    tree = ast.parse(source if source is not None else (PKG / rel).read_text())
    allowed = _allowed(tree, rel, only)
    return sorted(
        f"{rel}:{n.lineno}: {_text(n)!r}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant | ast.JoinedStr)
        and id(n) not in allowed
        and WORDS.search(_text(n))
    )


def test_no_analysis_module_builds_a_sentence() -> None:
    # The run readers' warnings ("line 100: not valid JSON, skipped"), the features'
    # conflicts, the contract's issues, the schedules' notes, the regimes' step names, the
    # incomplete steps' reasons, the gates' skipped steps ("spec at 4 req/s (incomplete)")
    # and the attribution's summary were sentences built under analysis/: they are facts,
    # worded in report/ (compare_words, contract_words, schedule_words, regime_words,
    # rule_words, gate_words, attribution_words). Only errors (raised) and docstrings speak.
    files = sorted(str(p.relative_to(PKG)) for p in (PKG / "analysis").rglob("*.py"))
    assert len(files) > 30, "analysis/ moved: point this check at it"
    bad = [hit for rel in files for hit in _sentences(rel)]
    assert not bad, "return a fact; word it in report/:\n" + "\n".join(bad)


def test_the_hosts_differences_are_facts_not_sentences() -> None:
    bad = [hit for rel, only in FACT_FUNCTIONS.items() for hit in _sentences(rel, only)]
    assert not bad, f"return a fact; word it in report/: {bad}"


def test_the_sentence_check_finds_sentences() -> None:
    # guards the guard: a sentence is found where there is one, an f-string's too; an
    # error raised and a docstring are not
    assert _sentences("report/contract_words.py"), "the check finds no f-string sentence"
    old = (
        "def _skip(cond: str, q: float) -> None:\n"
        '    """Docstrings speak."""\n'
        '    skipped.append(f"{cond} at {q:g} req/s (incomplete)")\n'
        '    raise ConfigError(f"--max-regression: every step in scope is incomplete")\n'
    )
    assert _sentences("analysis/decisions/gates.py", source=old) == [
        "analysis/decisions/gates.py:3: 'xx at xx req/s (incomplete)'"
    ]
    assert not _sentences("analysis/decisions/gates.py", {"other"}, source=old)


def test_the_rules_threshold_is_applied_in_effect_only() -> None:
    # dynamic.py, attribution.py and the crossover's replicates each compared ratios with
    # ``min_gain`` their own way: they call ``effect.classify`` / ``effect.reaches_gain``
    compare = re.compile(r"min_gain\b[^\n]*[<>]|[<>][^\n]*\bmin_gain\b")
    bad = [
        f"{rel}:{n}: {line.strip()}"
        # report/rule_words.py words the rule, with a margin or without one: it applies none
        for rel, n, line in _lines(("analysis/statistics/effect.py", "report/rule_words.py"))
        if compare.search(line)
        and not line.lstrip().startswith("def ")
        and "0 <= min_gain < 1" not in line  # the option's own range check
    ]
    assert not bad, "apply the rule with analysis.statistics.effect (classify, reaches_gain):\n" + (
        "\n".join(bad)
    )


def test_the_web_ui_shows_the_rules_words_sent_by_the_server() -> None:
    # The UI once mapped effects to its own words ("faster", "slower") beside a report that
    # said "helps", "hurts": it reads ``compare.effects`` (``report.rule_words.effect_text``).
    scripts = sorted(PKG.rglob("*.js"))
    assert scripts, "the web UI's script moved: point this check at it"
    bad = [
        f"{p.relative_to(PKG)}:{n}"
        for p in scripts
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"no significant change|\b(helps|hurts|same|undecided)\s*:", line)
    ]
    assert not bad, f"the web UI spells the rule's words itself: {bad}"


def test_the_rules_colours_are_defined_in_the_palette_only() -> None:
    # Four copies (plots, report.css, the web UI's css, the terminal) had drifted into four
    # greens: each reads ``report/palette.py`` (its CSS variables, its constants).
    from specload.report import palette

    hexes = {v.lower() for v in palette.CSS.values()}
    files = [p for ext in ("py", "css", "js", "j2") for p in PKG.rglob(f"*.{ext}")]
    bad = [
        f"{p.relative_to(PKG)}: {h}"
        for p in files
        if p.name != "palette.py"
        for h in hexes
        if h in p.read_text().lower()
    ]
    assert not bad, f"a colour of the rule defined outside report/palette.py: {bad}"
    for css in ("report/templates/report.css", "locust/webui_static/specload-ui.css"):
        assert "var(--sl-helps" in (PKG / css).read_text(), css


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    h = hex_colour.lstrip("#")
    h = "".join(c * 2 for c in h) if len(h) == 3 else h
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


#: How close (RGB distance) a colour may come to one of the palette's before it is a copy:
#: #f3f8f3 beside the palette's #e3f4e3, both "helps" tints, is 17.
NEAR = 40


def test_no_near_copy_of_the_palettes_colours() -> None:
    # The exact check above missed tints a few steps off the palette's (a second green for a
    # verdict, a third for a button, a red for errors): each a copy that could drift.
    from specload.report import palette

    colours = {*palette.CSS.values(), *palette.LINES}
    ours = {_rgb(v) for v in colours if len(set(_rgb(v))) > 1}  # greys are page chrome
    files = [p for ext in ("py", "css", "js", "j2") for p in PKG.rglob(f"*.{ext}")]
    bad = []
    for p in files:
        if p.name == "palette.py":
            continue
        for h in set(re.findall(r"#(?:[0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b", p.read_text())):
            rgb = _rgb(h)
            near = [
                c
                for c in ours
                if c != rgb and sum((a - b) ** 2 for a, b in zip(c, rgb, strict=True)) <= NEAR**2
            ]
            if near and len(set(rgb)) > 1:
                bad.append(f"{p.relative_to(PKG)}: {h}")
    assert not bad, f"a near-copy of a palette colour: use its --sl- variable: {sorted(bad)}"


def test_the_clients_take_their_settings_from_one_definition() -> None:
    # StreamClient and OpenAIStreamClient each spelled out api_key, timeout_s, concurrency...
    # with their own defaults
    import dataclasses
    import inspect

    from specload.client import ClientSettings, StreamClient, make_client
    from specload.client.openai_mode import OpenAIStreamClient

    names = {f.name for f in dataclasses.fields(ClientSettings)}
    for fn in (StreamClient.__init__, OpenAIStreamClient.__init__, make_client):
        params = set(inspect.signature(fn).parameters)
        assert "settings" in params and not params & names, (fn.__qualname__, params & names)


def test_the_checks_see_the_package() -> None:
    # guards the guards: a moved package would make the checks above pass vacuously
    assert (PKG / "recorder" / "run_json.py").is_file() and len(_lines(())) > 10_000
    assert (PKG / "report" / "report_json.py").is_file()


def test_the_logger_name_is_not_repeated_in_its_messages() -> None:
    """Locust shows each line as ``.../LEVEL/specload: MESSAGE``: a message that starts with
    "specload: " read "specload: specload: step 3/3" in the web UI's log."""
    call = re.compile(r"\blog\.(?:debug|info|warning|error|exception)\(\s*f?[\"']specload: ")
    doubled = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py") if call.search(p.read_text())]
    assert doubled == []
