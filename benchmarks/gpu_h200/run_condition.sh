#!/usr/bin/env bash
# One GPU-validation condition in one device call: install specload's wheels, start the
# server, run `specload run` headless with scenarios/gpu-h200.yaml, ALWAYS stop the server,
# pack the run dir into $OUT. See docs/gpu-validation.md for the whole procedure.
#
# usage: bash benchmarks/gpu_h200/run_condition.sh baseline|spec
#
# Writes to $OUT (at most 3 files, each well under the device tool's 16 MiB):
#   run-COND.tar.gz   the run dir (run.json, requests.jsonl, metrics.jsonl, steps.json)
#   server-COND.log   the server's log (vLLM: written by the kit's serve_vllm.sh)
#   (the caller tees this script's own output to $OUT/driver-COND.log)
#
# Knobs (env):
#   SERVER=vllm|sim   vllm: the kit's serve_vllm.sh (GPU host); sim: `specload sim` (dry run)
#   KIT               the shared/gpu kit folder (default: .gpu/kit, else /tmp/kit)
#   WHL               wheel folder to install into SL_SITE (default .gpu/whl)
#   SL_SITE           install target for specload + deps (default /tmp/sl; never /tmp/site,
#                     which holds vLLM's own pinned pyzmq etc.)
#   SL_INSTALL=0      use PY's own environment instead of installing wheels (local dry run)
#   PY                python (default python3: the GPU image's 3.12 with torch)
#   SCENARIO          default scenarios/gpu-h200.yaml
#   BUDGET_S          wall-clock budget of this script from its start (default 575): the
#                     specload run is capped so that the server is stopped and the run dir
#                     packed before it ends
#   SPEC_CONFIG       the spec condition's --speculative-config JSON (@DRAFT@ = draft dir)
#   SIM_PROFILE       simulator profile for SERVER=sim (default h200-llama8b)
#   PORT              server port (default 8000)
set -u -o pipefail

T0=$(date +%s)
export KIT_T0=$T0
COND=${1:-}
case "$COND" in baseline|spec) ;; *) echo "usage: $0 baseline|spec"; exit 2 ;; esac

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
SERVER=${SERVER:-vllm}
PY=${PY:-python3}
PORT=${PORT:-8000}
URL="http://127.0.0.1:$PORT"
OUT=${OUT:-$ROOT/gpu-out}
BUDGET_S=${BUDGET_S:-575}
SCENARIO=${SCENARIO:-scenarios/gpu-h200.yaml}
WHL=${WHL:-.gpu/whl}
SL_SITE=${SL_SITE:-/tmp/sl}
SIM_PROFILE=${SIM_PROFILE:-h200-llama8b}
RUNS=${RUNS:-/tmp/sl-runs}
RUN_DIR="$RUNS/$COND"
DEFAULT_SPEC='{"method":"draft_model","model":"@DRAFT@","num_speculative_tokens":4,"rejection_sample_method":"synthetic","synthetic_acceptance_rates":[0.8,0.55,0.3,0.15]}'
SPEC_CONFIG=${SPEC_CONFIG:-$DEFAULT_SPEC}
if [ -z "${KIT:-}" ]; then
  if [ -d .gpu/kit ]; then KIT=.gpu/kit; else KIT=/tmp/kit; fi
fi
mkdir -p "$OUT" "$RUNS"
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$ROOT/$1" ;; esac; }
KIT=$(abspath "$KIT"); WHL=$(abspath "$WHL"); SCENARIO=$(abspath "$SCENARIO")
OUT=$(cd "$OUT" && pwd); RUNS=$(cd "$RUNS" && pwd); RUN_DIR="$RUNS/$COND"
# Python puts the working directory first on sys.path (`python -m`, `python -`): run from
# $RUNS so that the installed wheel (built from the committed tree) is what runs, not the
# checkout's files, which may hold other people's uncommitted work.
cd "$RUNS" || exit 2
# Never let NVLink multicast on (shared hosts): also for the client, whatever it imports.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1

ts() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - T0 ))s] $*"; }
left() { echo $(( T0 + BUDGET_S - $(date +%s) )); }

# ------------------------------------------------------------ specload install
install_specload() {
  if [ "${SL_INSTALL:-1}" = 0 ]; then
    ts "SL_INSTALL=0: using $PY's own environment"
    return 0
  fi
  if [ -f "$SL_SITE/.sl_installed" ]; then
    ts "$SL_SITE already holds specload; skipping install"
  else
    ts "installing $(ls "$WHL"/*.whl | wc -l) wheels into $SL_SITE"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SL_SITE" "$WHL"/*.whl || { echo "ERROR: wheel install failed"; return 1; }
    touch "$SL_SITE/.sl_installed"
  fi
  export PYTHONPATH="$SL_SITE${PYTHONPATH:+:$PYTHONPATH}"
}

preflight() {
  local check=""
  [ "${SL_INSTALL:-1}" = 0 ] || check=$SL_SITE
  SL_SITE_CHECK=$check "$PY" - <<'EOF' || return 1
import importlib, sys
mods = ["gevent", "geventhttpclient", "locust", "orjson", "yaml", "prometheus_client", "specload"]
vers = {}
for m in mods:
    mod = importlib.import_module(m)
    vers[m] = getattr(mod, "__version__", "?")
print("python", sys.version.split()[0], " ".join(f"{k}={v}" for k, v in vers.items()))
import os
path = importlib.import_module("specload").__file__
print("specload from", path)
site = os.environ.get("SL_SITE_CHECK")
if site and not path.startswith(site):
    sys.exit(f"ERROR: specload imported from {path}, not from {site}")
EOF
  "$PY" -m specload run --help >/dev/null || { echo "ERROR: specload run --help failed"; return 1; }
}

# ------------------------------------------------------------------ servers
SIM_PID=""
SERVER_CMD=""
start_server() {
  if [ "$SERVER" = vllm ]; then
    [ -f "$KIT/serve_vllm.sh" ] || { echo "ERROR: no kit at $KIT"; return 1; }
    # leave at least 150 s for the load and 45 s to stop + pack
    local ht=$(( $(left) - 195 )); [ "$ht" -gt 420 ] && ht=420
    [ "$ht" -lt 60 ] && { echo "ERROR: only $(left)s left before the server starts"; return 1; }
    # the server sees only the kit's /tmp/site, never specload's wheels in $SL_SITE
    env -u PYTHONPATH SPEC_CONFIG="$SPEC_CONFIG" HEALTH_TIMEOUT_S=$ht OUT="$OUT" PORT="$PORT" \
      bash "$KIT/serve_vllm.sh" "$COND" 2>&1 | tee "$RUNS/serve-$COND.out" || return 1
    SERVER_CMD=$(grep -a -m1 'starting: ' "$RUNS/serve-$COND.out" | sed 's/.*starting: //')
    "$PY" "$KIT/benchtool.py" warmup --url "$URL" --n 8 --max-tokens 32 --timeout 60 \
      || ts "warmup had errors (continuing)"
    return 0
  fi
  local args=(-m specload sim --profile "$SIM_PROFILE" --host 127.0.0.1 --port "$PORT"
    --served-model-name target --no-enable-prefix-caching)
  if [ "$COND" = spec ]; then
    args+=(--speculative-config "${SPEC_CONFIG//@DRAFT@/draft-1b}")
  fi
  ts "starting: $PY ${args[*]}"
  SERVER_CMD="$PY ${args[*]}"
  setsid "$PY" "${args[@]}" >"$OUT/server-$COND.log" 2>&1 </dev/null &
  SIM_PID=$!
  for _ in $(seq 1 150); do
    if "$PY" -c "import urllib.request,sys; urllib.request.urlopen('$URL/health', timeout=2)" \
        2>/dev/null; then ts "sim healthy (pid $SIM_PID)"; return 0; fi
    kill -0 "$SIM_PID" 2>/dev/null || { echo "ERROR: sim exited"; tail -n 30 "$OUT/server-$COND.log"; return 1; }
    sleep 0.2
  done
  echo "ERROR: sim not healthy after 30 s"; return 1
}

stop_server() {
  if [ "$SERVER" = vllm ]; then
    [ -f "$KIT/stop_vllm.sh" ] && bash "$KIT/stop_vllm.sh"
  elif [ -n "$SIM_PID" ]; then
    kill -TERM -- "-$SIM_PID" 2>/dev/null || kill -TERM "$SIM_PID" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$SIM_PID" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$SIM_PID" 2>/dev/null || true
    wait "$SIM_PID" 2>/dev/null
    SIM_PID=""
  fi
  return 0
}

# --------------------------------------------------------------------- load
run_load() {
  local cap=$(( $(left) - 45 ))   # keep 45 s to stop the server and pack
  [ "$cap" -lt 30 ] && { echo "ERROR: only $(left)s left for the load"; return 1; }
  # the condition as declared (run.json): spec JSON or none, prefix caching off, server cmd
  local decl=(--prefix-caching off)
  [ "$COND" = spec ] && decl+=(--speculative-config "${SPEC_CONFIG//@DRAFT@/draft-1b}")
  [ -n "$SERVER_CMD" ] && decl+=(--server-cmd "$SERVER_CMD")
  rm -rf "$RUN_DIR"
  ts "specload run: label=$COND scenario=$SCENARIO cap=${cap}s out=$RUN_DIR"
  # SIGINT first (specload ends the run cleanly, status interrupted), SIGKILL 20 s later.
  timeout --signal=INT --kill-after=20 "$cap" \
    "$PY" -m specload run --host "$URL" --scenario "$SCENARIO" --label "$COND" \
      --out "$RUN_DIR" "${decl[@]}"
  local rc=$?
  ts "specload run exit code $rc"
  return "$rc"
}


pack() {
  if [ -d "$RUN_DIR" ]; then
    tar -czf "$OUT/run-$COND.tar.gz" -C "$RUNS" "$COND" && ts "packed $(du -h "$OUT/run-$COND.tar.gz" | cut -f1) run-$COND.tar.gz"
  else
    ts "no run dir at $RUN_DIR to pack"
  fi
  local log="$OUT/server-$COND.log" sz
  sz=$(stat -c %s "$log" 2>/dev/null || echo 0)
  if [ "$sz" -gt $(( 15 * 1024 * 1024 )) ]; then
    { head -c 2000000 "$log"; echo; echo "[... log truncated ...]"; tail -c 12000000 "$log"; } \
      > "$log.tmp" && mv "$log.tmp" "$log"
  fi
  ls -l "$OUT"
}

# --------------------------------------------------------------------- main
ts "condition=$COND server=$SERVER kit=$KIT scenario=$SCENARIO budget=${BUDGET_S}s out=$OUT"
trap 'stop_server' EXIT
trap 'stop_server; exit 130' INT TERM
install_specload || exit 3
preflight || exit 3
RC=0
if start_server; then
  run_load || RC=$?
else
  ts "server did not start"; RC=4
fi
stop_server
trap - EXIT INT TERM
pack
ts "done ($COND) rc=$RC"
exit "$RC"
