#!/usr/bin/env bash
# specload's GPU kit: baseline vs speculative decoding on your GPU host.
#
# usage: bash benchmarks/gpu/run.sh [--dry-run]
#
# MODE=interleaved (the default, for decisions): both vLLM servers on the ONE GPU at the same
# time (each --gpu-memory-utilization GPU_MEM, 0.42), started one after the other (each waits
# for /health before the next starts), warmed up, then ONE `specload sweep --interleave` over
# both: every (condition, step) cell cut into the scenario's blocks, run in a seeded balanced
# random order, so the GPU's drift (the draft step flips between ~13 and ~20 ms in windows of
# seconds) hits both conditions alike instead of deciding a cell. Then both servers stop
# (whole process groups), `specload compare` (OUT/sweep/report/), everything packed into
# OUT.tar.gz. Scenario: scenarios/gpu-h200-interleaved.yaml (about 18 minutes of blocks).
#
# MODE=starts (the earlier protocol): each condition on several fresh vLLM server starts,
# interleaved (baseline, spec, baseline, spec, ...). Per server start: start vLLM with the
# condition's flags, wait for /health, warm up (8 short requests), run `specload sweep --url`
# against it (the scenario's steps), then, for reference, vLLM's own `bench serve` at the same
# rates on the same server, and stop the server. At the end: `specload compare` over every
# start (OUT/sweep/report/), the per-start table (OUT/table.md), specload beside vLLM's client
# per start (OUT/vllm-bench/table-rK.md), and everything packed into OUT.tar.gz.
# See benchmarks/gpu/README.md.
#
# --dry-run: the same kit end to end on any CPU machine, with `specload sim --profile
#   h200-llama8b` (the simulator calibrated to vLLM 0.26 on one H200) in vLLM's place and the
#   steps shortened (interleaved: the spec server with --spec-regime calibrated, the measured
#   fast/slow windows; 2-3 minutes); vLLM's bench serve runs when VLLM names a working
#   vLLM CLI, else is skipped.
#
# Knobs (environment):
#   MODE         interleaved (default) or starts
#   OUT          output folder (default runs/gpu-kit; must not hold an earlier kit run)
#   SCENARIO     default scenarios/gpu-h200-interleaved.yaml (MODE=interleaved: concurrency 1
#                and 8, 4 8 16 req/s, 6 blocks of 5 s + 7.5 s per cell) or
#                scenarios/gpu-h200-replicates.yaml (MODE=starts: 6 rates, 4 s + 20 s each)
#   GPU_MEM      vLLM --gpu-memory-utilization per server (default 0.42 interleaved: two
#                servers share the GPU; 0.85 starts)
#   BLOCKS, BLOCK_WARMUP_S  override the scenario's interleave blocks (--dry-run defaults:
#                2 blocks, 1 s warm-up)
#   REPLICATES   MODE=starts: server starts per condition (default 3: the fewest with an
#                interval about this config beside the one that decides, about these starts)
#   TARGET       target model folder or hub name (default: the kit's Llama-3.1-8B-shaped
#                config, benchmarks/gpu/models/target-8b, with LOAD_FORMAT=dummy)
#   DRAFT        draft model (default: the kit's Llama-3.2-1B-shaped config)
#   TOKENIZER    tokenizer folder or name (default: the kit's 32k BPE with TARGET unset, else TARGET)
#   LOAD_FORMAT  vLLM --load-format (default: dummy for the kit's models, auto otherwise;
#                dummy weights measure serving cost only: acceptance is then set by SPEC_CONFIG)
#   SPEC_CONFIG  the spec condition's --speculative-config JSON; @DRAFT@ stands for DRAFT.
#                Default: draft_model, k=4, synthetic acceptance [0.8, 0.55, 0.3, 0.15].
#                off: an A/A check, the "spec" server started as the baseline (no
#                speculation): the true effect is 0, so every step should end "same"
#   EXTRA_SERVE_ARGS  more vLLM flags for both conditions (split on spaces)
#   VLLM         how to run vLLM's CLI (default "vllm"; e.g. "python3 -m vllm.entrypoints.cli.main")
#   SITE         a folder install_bundle.sh filled (offline hosts): put on PYTHONPATH, and
#                VLLM defaults to "$PY -m vllm.entrypoints.cli.main"
#   PORT         server port (default 8000, interleaved: baseline 8000, spec 8001; free
#                ports with --dry-run)
#   HEALTH_TIMEOUT  seconds to wait for each server (default 600: a first start compiles)
#   BENCH        1 runs vLLM's bench serve on every start (default with MODE=starts), first on
#                the first start of each condition only (it costs GPU time too), 0 never
#                (default with MODE=interleaved; 1 there runs it on both servers after the sweep)
#   BENCH_RATES  the rates vLLM's bench serve runs (default: the scenario's)
#   BENCH_S      seconds of arrivals per bench rate (default 20: num_prompts = min(max(32, 20 R), 800))
#   PY           the Python that has specload (default: the checkout's .venv, else python3); SPECLOAD (default "$PY -m specload")
#   STEPS, STEP_S, WARMUP_S   override the scenario's steps (space-separated rates, or a YAML
#                list body with commas: '{concurrency: 1}, 8') and step times (--dry-run
#                defaults: the scenario's steps, 3 s and 1 s; interleaved 2 s)
#   UNTIL_DECIDED  MODE=interleaved: seconds; the sweep runs --until-decided --budget-s
#                UNTIL_DECIDED (after the scenario's blocks, more block pairs where a step is
#                undecided, until every step is decided or the budget, counted from the
#                sweep's start, is spent); empty (default): the scenario's blocks only
#   BLOCKS, BLOCK_WARMUP_S, ORDER_SEED, ORDER   MODE=interleaved: override the scenario's
#                blocks per cell, warm-up per block, the seed of the block order (a second
#                session with its own ORDER_SEED checks that the answer does not depend on the
#                order) and the order itself (spread or grouped; the scenario's is kept)
#
# Both conditions run vLLM's V1 model runner with async scheduling and prefix caching off
# (vLLM 0.26 runs draft_model only on V1 and turns async scheduling off for it, so the two
# conditions differ by speculative decoding alone), --max-model-len 4096,
# --gpu-memory-utilization GPU_MEM. Exit status: 0 when every run completed and compared, 1 when a
# run or the comparison failed (the rest still ran and was packed), 2 on bad usage.
set -u -o pipefail

KIT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$KIT/../.." && pwd)
DRY=0
case "${1:-}" in
  --dry-run) DRY=1 ;;
  -h|--help) sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "usage: bash benchmarks/gpu/run.sh [--dry-run]   (--help explains the knobs)" >&2; exit 2 ;;
esac

if [ -z "${PY:-}" ]; then  # the checkout's env (make env / make demo) when there is one
  if [ -x "$ROOT/.venv/bin/python" ]; then PY=$ROOT/.venv/bin/python; else PY=python3; fi
fi
SPECLOAD=${SPECLOAD:-$PY -m specload}
"$PY" -c 'import specload' 2>/dev/null || {
  echo "gpu-kit: $PY cannot import specload: pip install . (or make env), or set PY" >&2; exit 2; }
MODE=${MODE:-interleaved}
case "$MODE" in
  interleaved) SCENARIO=${SCENARIO:-$ROOT/scenarios/gpu-h200-interleaved.yaml}; BENCH=${BENCH:-0}
    GPU_MEM=${GPU_MEM:-0.42} ;;
  starts) SCENARIO=${SCENARIO:-$ROOT/scenarios/gpu-h200-replicates.yaml}; BENCH=${BENCH:-1}
    GPU_MEM=${GPU_MEM:-0.85} ;;
  *) echo "gpu-kit: MODE is interleaved or starts, not '$MODE'" >&2; exit 2 ;;
esac
OUT=${OUT:-runs/gpu-kit}
REPLICATES=${REPLICATES:-3}
HEALTH_TIMEOUT=${HEALTH_TIMEOUT:-600}
DEFAULT_SPEC='{"method":"draft_model","model":"@DRAFT@","num_speculative_tokens":4,"rejection_sample_method":"synthetic","synthetic_acceptance_rates":[0.8,0.55,0.3,0.15]}'
SPEC_CONFIG=${SPEC_CONFIG:-$DEFAULT_SPEC}
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} VLLM_NO_USAGE_STATS=1
if [ -n "${SITE:-}" ]; then
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  VLLM=${VLLM:-$PY -m vllm.entrypoints.cli.main}
fi
VLLM_GIVEN=${VLLM:+1}
VLLM=${VLLM:-vllm}
T0=$(date +%s)
say() { echo "[gpu-kit +$(( $(date +%s) - T0 ))s] $*"; }

if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  echo "gpu-kit: $OUT already holds files; give another OUT (runs are never overwritten)" >&2
  exit 2
fi
mkdir -p "$OUT"/servers "$OUT"/vllm-bench
OUT=$(cd "$OUT" && pwd)

# ------------------------------------------------------------------ models and scenario
if [ -z "${TARGET:-}" ]; then
  # The kit's dummy-weight models: vLLM wants the tokenizer files in each model folder.
  for m in target-8b draft-1b; do
    mkdir -p "$OUT/models/$m"
    cp "$KIT/models/$m/config.json" "$KIT"/models/tokenizer/* "$OUT/models/$m/"
  done
  TARGET=$OUT/models/target-8b
  DRAFT=${DRAFT:-$OUT/models/draft-1b}
  TOKENIZER=${TOKENIZER:-$KIT/models/tokenizer}
  LOAD_FORMAT=${LOAD_FORMAT:-dummy}
fi
TOKENIZER=${TOKENIZER:-$TARGET}
LOAD_FORMAT=${LOAD_FORMAT:-auto}
if [ "$DRY" = 1 ]; then
  if [ "$MODE" = interleaved ]; then
    STEP_S=${STEP_S:-2}
    BLOCKS=${BLOCKS:-2}
    BLOCK_WARMUP_S=${BLOCK_WARMUP_S:-1}
  fi
  STEP_S=${STEP_S:-3}
  WARMUP_S=${WARMUP_S:-1}
  BENCH_S=${BENCH_S:-3}
  MIN_PROMPTS=4
  if [ "$MODE" = interleaved ]; then PORT=${PORT:-0}  # 0: kit.py picks a free port per server
  else PORT=${PORT:-$("$PY" -c 'from specload.core.ports import free_port; print(free_port())')}; fi
  SPEC=${SPEC_CONFIG//@DRAFT@/draft-1b}
else
  : "${DRAFT:?set DRAFT to the draft model (folder or name) when TARGET is set}"
  BENCH_S=${BENCH_S:-20}
  MIN_PROMPTS=32
  PORT=${PORT:-8000}
  SPEC=${SPEC_CONFIG//@DRAFT@/$DRAFT}
fi
cp "$SCENARIO" "$OUT/scenario.yaml"
if [ -n "${STEPS:-}" ]; then  # space-separated rates, or a list body with commas as it is
  case "$STEPS" in *,*) body=$STEPS ;; *) body=$(echo "$STEPS" | sed 's/ \+/, /g') ;; esac
  sed -i "s/^steps: .*/steps: [$body]/" "$OUT/scenario.yaml"
fi
[ -n "${STEP_S:-}" ] && sed -i "s/^step_duration_s: .*/step_duration_s: $STEP_S/" "$OUT/scenario.yaml"
[ -n "${WARMUP_S:-}" ] && sed -i "s/^warmup_s: .*/warmup_s: $WARMUP_S/" "$OUT/scenario.yaml"
if [ "$MODE" = interleaved ] && [ -n "${BLOCKS:-}${BLOCK_WARMUP_S:-}${ORDER_SEED:-}${ORDER:-}" ]; then
  grep -q '^interleave: {blocks: [0-9]*[,}]' "$OUT/scenario.yaml" || {
    echo "gpu-kit: BLOCKS/BLOCK_WARMUP_S/ORDER_SEED/ORDER need a one-line 'interleave: {blocks: N, ...}' in $SCENARIO" >&2; exit 2; }
  blocks=${BLOCKS:-$(sed -n 's/^interleave: {blocks: \([0-9]*\).*/\1/p' "$OUT/scenario.yaml")}
  warm=${BLOCK_WARMUP_S:-$(sed -n 's/^interleave: {.*block_warmup_s: \([0-9.]*\).*/\1/p' "$OUT/scenario.yaml")}
  order=${ORDER:-$(sed -n 's/^interleave: {.*order: \([a-z]*\).*/\1/p' "$OUT/scenario.yaml")}
  line="interleave: {blocks: $blocks${warm:+, block_warmup_s: $warm}${ORDER_SEED:+, seed: $ORDER_SEED}${order:+, order: $order}}"
  sed -i "s/^interleave: {.*}/$line/" "$OUT/scenario.yaml"
fi
STEPS_LINE=$(sed -n 's/^steps: *\[\(.*\)\].*/\1/p' "$OUT/scenario.yaml")
[ -n "$STEPS_LINE" ] || { echo "gpu-kit: $SCENARIO has no 'steps: [...]' line" >&2; exit 2; }
RATES=$(echo "$STEPS_LINE" | sed 's/{[^}]*}//g' | tr -d ',' | xargs)  # QPS steps only
BENCH_RATES=${BENCH_RATES:-$RATES}

case "$BENCH" in 0|1|first) ;; *) echo "gpu-kit: BENCH is 1, first or 0, not '$BENCH'" >&2; exit 2 ;; esac
vllm_runs() {  # the GPU run checks vLLM's CLI runs (seconds: it imports vLLM); a dry run
  # trusts a VLLM you set, and otherwise only looks for a `vllm` command
  if [ "$DRY" = 1 ]; then [ -n "$VLLM_GIVEN" ] || command -v vllm >/dev/null 2>&1
  else $VLLM --version >/dev/null 2>&1; fi
}
if [ "$BENCH" != 0 ] && ! vllm_runs; then
  if [ "$DRY" = 1 ]; then
    say "vLLM's bench serve: skipped (no vLLM CLI as VLLM='$VLLM'); specload runs alone"
    BENCH=0
  else
    echo "gpu-kit: VLLM='$VLLM' does not run ('$VLLM --version' failed); set VLLM or SITE" >&2
    exit 2
  fi
fi

# The server's command line per condition; SPECLOADPORT and SPECLOADREP become the
# {port} and {replicate} placeholders specload substitutes for each start.
server_argv() {  # server_argv COND -> SARGS
  local cond=$1
  if [ "$DRY" = 1 ]; then
    SARGS=("$PY" -m specload sim --host 127.0.0.1 --port SPECLOADPORT --profile h200-llama8b
      --served-model-name target --no-enable-prefix-caching)
    if [ "$MODE" = starts ]; then SARGS+=(--start-jitter 0.05 --start-seed SPECLOADREP)
    elif [ "$cond" = spec ] && [ "$SPEC" != off ]; then SARGS+=(--spec-regime calibrated); fi
  else
    # shellcheck disable=SC2206  # VLLM is a command line, split on purpose
    SARGS=(env VLLM_USE_V2_MODEL_RUNNER=0 $VLLM serve "$TARGET" --load-format "$LOAD_FORMAT"
      --host 127.0.0.1 --port SPECLOADPORT --max-model-len 4096 --gpu-memory-utilization "$GPU_MEM"
      --served-model-name target --tokenizer "$TOKENIZER" --disable-uvicorn-access-log
      --no-enable-prefix-caching --no-async-scheduling)
    # shellcheck disable=SC2206
    [ -n "${EXTRA_SERVE_ARGS:-}" ] && SARGS+=($EXTRA_SERVE_ARGS)
  fi
  if [ "$cond" = spec ] && [ "$SPEC" != off ]; then SARGS+=(--speculative-config "$SPEC"); fi
  return 0
}
server_cmd() {  # server_cmd COND -> one shell line, quoted, with the placeholders
  local line
  server_argv "$1"
  line=$(printf '%q ' "${SARGS[@]}")
  line=${line//SPECLOADPORT/\{port\}}
  echo "${line//SPECLOADREP/\{replicate\}}"
}

if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,power.limit \
    --format=csv > "$OUT/nvidia-smi.csv" 2>&1
fi
[ "$MODE" = interleaved ] && REPLICATES=1  # one session: both servers started once
say "mode=$MODE out=$OUT port=$PORT replicates=$REPLICATES steps='$STEPS_LINE' dry_run=$DRY bench=$BENCH gpu_mem=$GPU_MEM"

FAILED=0
# interleaved: both servers up (one after the other, each its own process group), warm-ups,
# one specload sweep --interleave, (vLLM's bench), both down; starts: every start the server
# up, warm-up, specload sweep, vLLM's bench on the same server, the server down (kit.py, with
# specload's ManagedServer)
KIT_ARGS=(--baseline-cmd "$(server_cmd baseline)" --spec-cmd "$(server_cmd spec)"
  --spec-declared "$SPEC" --port "$PORT" --health-timeout "$HEALTH_TIMEOUT"
  --scenario "$OUT/scenario.yaml" --out "$OUT" --specload "$SPECLOAD" --bench "$BENCH"
  --vllm "$VLLM" --rates "$BENCH_RATES" --tokenizer "$TOKENIZER" --seconds "$BENCH_S"
  --min-prompts "$MIN_PROMPTS")
if [ "$MODE" = interleaved ]; then
  "$PY" "$KIT/kit.py" interleaved "${KIT_ARGS[@]}" --until-decided "${UNTIL_DECIDED:-0}" || FAILED=1
else
  "$PY" "$KIT/kit.py" starts "${KIT_ARGS[@]}" --replicates "$REPLICATES" || FAILED=1
fi

# ------------------------------------------------------------------ compare, tables, pack
say "comparing"
# shellcheck disable=SC2086
$SPECLOAD compare "$OUT/sweep" --out "$OUT/sweep/report" || { say "specload compare failed"; FAILED=1; }
if [ "$MODE" = starts ] && [ "$REPLICATES" -ge 2 ]; then
  "$PY" "$KIT/replicates_table.py" "$OUT/sweep" --out "$OUT/table.md" || FAILED=1
fi
if [ "$BENCH" != 0 ]; then
  for rep in $(seq 1 "$REPLICATES"); do
    [ -f "$OUT/vllm-bench/r$rep.json" ] || continue
    sfx=""; [ "$rep" -gt 1 ] && sfx="-r$rep"
    "$PY" "$KIT/table.py" --baseline "$OUT/sweep/baseline$sfx" --spec "$OUT/sweep/spec$sfx" \
      --calibration "$OUT/vllm-bench/r$rep.json" --out "$OUT/vllm-bench/table-r$rep.md" \
      > /dev/null || { say "table.py failed for start $rep"; FAILED=1; }
  done
fi
rm -rf "$OUT/models"
tar -czf "$OUT.tar.gz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
say "report: $OUT/sweep/report/report.html"
[ "$MODE" = starts ] && [ "$REPLICATES" -ge 2 ] && say "per-start table: $OUT/table.md"
[ "$BENCH" != 0 ] && say "specload beside vLLM's bench serve: $OUT/vllm-bench/table-r*.md"
say "packed: $OUT.tar.gz"
exit "$FAILED"
