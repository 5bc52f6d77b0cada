#!/usr/bin/env bash
# Prepare the GPU validation's carried files in .gpu/ (git-ignored through .git/info/exclude):
#   .gpu/kit/    the shared/gpu kit minus the tokenizer copies in the model folders
#   .gpu/parts/  the vLLM 0.26.0 bundle parts (min.part.00..02)
#   .gpu/whl/    specload (built from the committed HEAD) + the dependencies the GPU image lacks
# and print what each device call will carry against the 64 MiB limit.
#
# usage: bash benchmarks/gpu_h200/prepare.sh [BUNDLE_DIR]
#   BUNDLE_DIR  a built bundle (min.part.*); default /tmp/vllm-bundle, built if missing
#   SHARED      the shared folder (default ../shared beside the checkout)
set -eu -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
SHARED=${SHARED:-$ROOT/../shared}
BUNDLE=${1:-/tmp/vllm-bundle}
PIP=${PIP:-python3 -m pip}

grep -qx '/.gpu/' .git/info/exclude || echo /.gpu/ >> .git/info/exclude
mkdir -p .gpu/parts .gpu/whl

# kit: the model folders get their tokenizer files from vllm_common.sh's kit_models in /tmp
rm -rf .gpu/kit && mkdir -p .gpu/kit/target-8b .gpu/kit/draft-1b .gpu/kit/tokenizer
cp "$SHARED"/gpu/*.sh "$SHARED"/gpu/benchtool.py "$SHARED"/gpu/bundle.sha256 .gpu/kit/
cp "$SHARED"/gpu/target-8b/config.json .gpu/kit/target-8b/
cp "$SHARED"/gpu/draft-1b/config.json .gpu/kit/draft-1b/
cp "$SHARED"/gpu/tokenizer/* .gpu/kit/tokenizer/
chmod -R u+w .gpu/kit

# bundle parts
if ! ls "$BUNDLE"/min.part.00 >/dev/null 2>&1; then
  bash "$SHARED/gpu/build-vllm-bundle.sh" "$BUNDLE"
fi
cp "$BUNDLE"/min.part.0* .gpu/parts/
# checksums: the install checks against the kit's bundle.sha256 unless min.sha256 is staged
if ! (cd .gpu/parts && sha256sum -c --quiet "$ROOT/.gpu/kit/bundle.sha256"); then
  echo "parts differ from the reference build: carry $BUNDLE/min.sha256 with the last part"
  cp "$BUNDLE/min.sha256" .gpu/parts/
fi

# dependencies missing from the GPU image (KINDS.md's list), CPython 3.12 manylinux x86_64
DEPS="locust==2.47.0 gevent==26.9.0 geventhttpclient==2.6.1 greenlet==3.5.6 zope.event==6.2
  zope.interface==8.7 flask==3.1.3 flask-cors==6.0.5 flask-login==0.6.3 configargparse==1.9.0
  pyzmq==27.3.0 orjson==3.13.0 blinker==1.9.0 itsdangerous==2.2.0 brotli==1.2.1
  python-socketio==5.18.1 python-engineio==4.15.1 bidict==0.24.1 simple-websocket==1.1.0
  wsproto==1.3.2 werkzeug==3.1.9 requests==2.34.2 h11==0.16.0"
PLAT=""
for n in 2_28 2_27 2_26 2_24 2_17 2_5; do PLAT="$PLAT --platform manylinux_${n}_x86_64"; done
# shellcheck disable=SC2086
$PIP download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  $PLAT --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .gpu/whl $DEPS

# specload from the committed tree (not from other people's uncommitted work in progress)
rm -f .gpu/whl/specload-*.whl
SRC=$(mktemp -d /tmp/slsrc-XXXXXX)
git archive HEAD | tar -x -C "$SRC"
$PIP wheel -q --no-deps "$SRC" -w .gpu/whl
rm -rf "$SRC"
echo "specload wheel: $(ls .gpu/whl/specload-*.whl) from $(git rev-parse --short HEAD)"

# what each call carries (tree = tracked + untracked files git does not ignore)
tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
mib() { echo "$(( $1 / 1048576 )).$(( ($1 % 1048576) * 10 / 1048576 )) MiB"; }
sz() { du -sb "$@" | awk '{s+=$1} END {print s}'; }
echo "tree: $(mib "$tree")"
echo "call 1: $(mib $(( tree + $(sz .gpu/parts/min.part.00) )))"
echo "call 2: $(mib $(( tree + $(sz .gpu/parts/min.part.01) )))"
echo "call 3: $(mib $(( tree + $(sz .gpu/parts/min.part.02 .gpu/kit .gpu/whl) )))"
echo "call 4: $(mib $(( tree + $(sz .gpu/kit .gpu/whl) )))   (limit: 64 MiB each)"
