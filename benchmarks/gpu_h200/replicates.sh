#!/usr/bin/env bash
# Issue 16's GPU validation on your own GPU host: baseline vs draft-model speculative decoding
# on vLLM 0.26, each condition on two fresh server starts, interleaved (baseline, spec,
# baseline, spec), with `specload sweep --replicates 2`. See docs/gpu-validation.md.
#
# usage: bash benchmarks/gpu_h200/replicates.sh
#
# Knobs (env):
#   OUT         sweep directory (default runs/gpu-h200-replicates; must not hold these runs)
#   SCENARIO    default scenarios/gpu-h200-replicates.yaml (6 rates, 4 s + 20 s each)
#   REPLICATES  server starts per condition (default: the scenario's, 2)
#   SERVER      vllm (default) or sim: `specload sim --profile h200-llama8b` in vLLM's place,
#               for a dry run of everything but the GPU (steps shortened with STEP_S/WARMUP_S)
#   VLLM        how to start vLLM's CLI (default: "vllm"); e.g. "python3 -m
#               vllm.entrypoints.cli.main" or "env PYTHONPATH=/opt/vllm python3 -m ..."
#   TARGET      the target model (a folder or a hub name); served as "target"
#   DRAFT       the draft model for speculative decoding
#   TOKENIZER   tokenizer folder or name (default: TARGET)
#   LOAD_FORMAT vLLM --load-format (default auto; "dummy" measures serving cost with random
#               weights, as the calibration did: acceptance is then set by SPEC_CONFIG)
#   SPEC_CONFIG the spec condition's --speculative-config JSON; @DRAFT@ stands for DRAFT.
#               Default: draft_model, k=4, synthetic acceptance 0.8/0.55/0.3/0.15 (mean
#               acceptance length 2.8), the calibration's setting.
#   EXTRA_SERVE_ARGS  more vLLM flags for both conditions
#   HEALTH_TIMEOUT    seconds to wait for each server (default 600; a first start compiles)
#   PY          the Python that has specload (default python3)
#   SPECLOAD    how to run specload (default: "$PY -m specload")
#
# Both conditions run vLLM's V1 model runner with async scheduling off and prefix caching off
# (vLLM 0.26 runs draft_model only on V1 and turns async scheduling off for it, so the two
# conditions differ by speculative decoding alone), --max-model-len 4096,
# --gpu-memory-utilization 0.85.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-runs/gpu-h200-replicates}
SCENARIO=${SCENARIO:-$ROOT/scenarios/gpu-h200-replicates.yaml}
SERVER=${SERVER:-vllm}
PY=${PY:-python3}
SPECLOAD=${SPECLOAD:-$PY -m specload}
DEFAULT_SPEC='{"method":"draft_model","model":"@DRAFT@","num_speculative_tokens":4,"rejection_sample_method":"synthetic","synthetic_acceptance_rates":[0.8,0.55,0.3,0.15]}'
SPEC_CONFIG=${SPEC_CONFIG:-$DEFAULT_SPEC}
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1

if [ "$SERVER" = sim ]; then
  # The simulator in vLLM's place: the same sweep, minutes instead of a GPU.
  SHORT=$(mktemp -t gpu-replicates-XXXX.yaml)
  sed -e "s/^step_duration_s: .*/step_duration_s: ${STEP_S:-3}/" \
      -e "s/^warmup_s: .*/warmup_s: ${WARMUP_S:-1}/" "$SCENARIO" > "$SHORT"
  SCENARIO=$SHORT
  SERVER_CMD="$PY -m specload sim --host 127.0.0.1 --port {port} --profile h200-llama8b \
--served-model-name target --start-jitter 0.05 --start-seed {replicate}"
  SPEC=${SPEC_CONFIG//@DRAFT@/draft-1b}
else
  : "${TARGET:?set TARGET to the target model (folder or name)}"
  : "${DRAFT:?set DRAFT to the draft model (folder or name)}"
  TOKENIZER=${TOKENIZER:-$TARGET}
  SERVER_CMD="env VLLM_USE_V2_MODEL_RUNNER=0 ${VLLM:-vllm} serve $TARGET \
--load-format ${LOAD_FORMAT:-auto} --host 127.0.0.1 --port {port} --max-model-len 4096 \
--gpu-memory-utilization 0.85 --served-model-name target --tokenizer $TOKENIZER \
--disable-uvicorn-access-log --no-enable-prefix-caching --no-async-scheduling \
${EXTRA_SERVE_ARGS:-}"
  SPEC=${SPEC_CONFIG//@DRAFT@/$DRAFT}
fi

ARGS=(sweep --server-cmd "$SERVER_CMD"
  --condition "baseline="
  --condition "spec=--speculative-config $SPEC"
  --scenario "$SCENARIO" --out "$OUT"
  --health-timeout "${HEALTH_TIMEOUT:-600}")
[ -n "${REPLICATES:-}" ] && ARGS+=(--replicates "$REPLICATES")
echo "[replicates.sh] $SPECLOAD ${ARGS[*]}"
# shellcheck disable=SC2086
exec $SPECLOAD "${ARGS[@]}"
