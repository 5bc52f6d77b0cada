#!/usr/bin/env bash
# Install the offline vLLM 0.26.0 bundle (from build_bundle.sh) into a folder, on a GPU host
# without network whose Python 3.12 already has torch 2.11.0 (CUDA 13) and transformers.
#
# usage: bash benchmarks/gpu/install_bundle.sh BUNDLE_DIR SITE
#   BUNDLE_DIR holds vllm-bundle.tar (or vllm-bundle.tar.part.00, 01, ...) and
#   vllm-bundle.sha256; SITE is the folder vLLM goes into (created).
#   then: SITE=SITE bash benchmarks/gpu/run.sh   (puts SITE on PYTHONPATH)
#
# Checks every file against vllm-bundle.sha256, unpacks vllm (trimmed) into SITE and installs
# the bundled wheels there with pip (--target, --no-index, --no-deps), or unzips them where the
# Python has no pip. Env: PY (default python3). Exit 1 on a missing or corrupt file.
set -euo pipefail
BUNDLE=${1:-}
SITE=${2:-}
[ -n "$BUNDLE" ] && [ -n "$SITE" ] || { echo "usage: $0 BUNDLE_DIR SITE" >&2; exit 2; }
PY=${PY:-python3}
say() { echo "[install_bundle $(date -u +%H:%M:%S)] $*"; }

"$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' || {
  echo "ERROR: the bundle's wheels are for CPython 3.12; $PY is $("$PY" -V 2>&1) (set PY)" >&2; exit 1; }
[ -f "$BUNDLE/vllm-bundle.sha256" ] || { echo "ERROR: $BUNDLE/vllm-bundle.sha256 missing" >&2; exit 1; }
(cd "$BUNDLE" && sha256sum -c --quiet vllm-bundle.sha256) \
  || { echo "ERROR: a bundle file is missing or differs from vllm-bundle.sha256" >&2; exit 1; }
mapfile -t FILES < <(awk '{print $2}' "$BUNDLE/vllm-bundle.sha256" | sort)
WORK=$(mktemp -d -t vllm-bundle-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
(cd "$BUNDLE" && cat "${FILES[@]}") | tar -xf - -C "$WORK"
[ -f "$WORK/vllm-trim.tar.xz" ] || { echo "ERROR: no vllm-trim.tar.xz in the bundle" >&2; exit 1; }
mkdir -p "$SITE"
say "unpacking vllm into $SITE"
if command -v xz >/dev/null 2>&1; then
  tar -xJf "$WORK/vllm-trim.tar.xz" -C "$SITE"
else
  "$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2], filter="data")' \
    "$WORK/vllm-trim.tar.xz" "$SITE"
fi
say "installing $(ls "$WORK"/wheels/*.whl | wc -l) wheels into $SITE"
if "$PY" -m pip --version >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$WORK"/wheels/*.whl
else
  # no pip: a wheel is a zip whose purelib/platlib files belong at the top of SITE
  "$PY" - "$SITE" "$WORK"/wheels/*.whl <<'PYEOF'
import os, shutil, sys, zipfile
site = sys.argv[1]
for whl in sys.argv[2:]:
    with zipfile.ZipFile(whl) as z:
        for m in z.namelist():
            parts = m.split("/")
            if m.endswith("/") or ".." in parts:
                continue
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                parts = parts[2:]
            dest = os.path.join(site, *parts)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with z.open(m) as src, open(dest, "wb") as dst:
                shutil.copyfileobj(src, dst)
PYEOF
fi
say "vllm $(PYTHONPATH="$SITE" "$PY" -c 'import vllm; print(vllm.__version__)' 2>/dev/null || echo '(import failed: does this Python have torch 2.11?)') in $SITE"
say "next: SITE=$SITE bash benchmarks/gpu/run.sh"
