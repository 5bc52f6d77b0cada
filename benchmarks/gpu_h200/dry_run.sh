#!/usr/bin/env bash
# Dry run of the GPU validation here, before any device time is spent: the exact driver
# (run_condition.sh) for both conditions against `specload sim --profile h200-llama8b` in
# place of vLLM, with the scenario's steps shortened, each run dir packed as on the GPU host,
# then unpacked, compared with `specload compare` and tabulated with table.py.
#
# usage: bash benchmarks/gpu_h200/dry_run.sh
# Knobs (env): STEP_S (3) and WARMUP_S (1) per step; PY (.venv/bin/python); SL_INSTALL (0:
#   use PY's environment; 1: install WHL's wheels into SL_SITE as on the GPU host);
#   WHL, SL_SITE (as run_condition.sh); DRY (/tmp/gpu-dry); PORT (a free port).
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
PY=${PY:-$ROOT/.venv/bin/python}
DRY=${DRY:-/tmp/gpu-dry}
STEP_S=${STEP_S:-3}
WARMUP_S=${WARMUP_S:-1}
PORT=${PORT:-$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
rm -rf "$DRY" && mkdir -p "$DRY/runs" "$DRY/unpacked"

sed -e "s/^step_duration_s: .*/step_duration_s: $STEP_S/" -e "s/^warmup_s: .*/warmup_s: $WARMUP_S/" \
  scenarios/gpu-h200.yaml > "$DRY/gpu-h200-short.yaml"
grep -E '^(steps|step_duration_s|warmup_s):' "$DRY/gpu-h200-short.yaml"

rc=0
for cond in baseline spec; do
  mkdir -p "$DRY/out-$cond"
  SERVER=sim SL_INSTALL=${SL_INSTALL:-0} PY=$PY PORT=$PORT BUDGET_S=${BUDGET_S:-300} \
    OUT="$DRY/out-$cond" RUNS="$DRY/runs" SCENARIO="$DRY/gpu-h200-short.yaml" \
    bash benchmarks/gpu_h200/run_condition.sh "$cond" 2>&1 | tee "$DRY/out-$cond/driver-$cond.log"
  c=$?
  echo "== $cond: driver exit $c; back in \$OUT: $(ls "$DRY/out-$cond" | tr '\n' ' ')"
  [ "$c" = 0 ] || rc=$c
  tar -xzf "$DRY/out-$cond/run-$cond.tar.gz" -C "$DRY/unpacked" || rc=1
done

SLPATH=""
[ "${SL_INSTALL:-0}" = 1 ] && SLPATH=${SL_SITE:-/tmp/sl}
# compare runs here, in the project's own environment, as after the device runs
(cd "$ROOT" && "${COMPARE_PY:-$ROOT/.venv/bin/python}" -m specload compare "$DRY/unpacked/baseline" "$DRY/unpacked/spec" \
  --baseline baseline --out "$DRY/report") || { echo "compare exit $?"; rc=1; }
PYTHONPATH=$SLPATH "$PY" benchmarks/gpu_h200/table.py --baseline "$DRY/out-baseline/run-baseline.tar.gz" \
  --spec "$DRY/out-spec/run-spec.tar.gz" --out "$DRY/table.md" || rc=1
echo "dry run exit $rc (files in $DRY)"
exit "$rc"
