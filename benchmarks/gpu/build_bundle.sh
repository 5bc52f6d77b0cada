#!/usr/bin/env bash
# Build the offline vLLM 0.26.0 bundle, for a GPU host without network, on any Linux machine
# with pip and network (it need not have a GPU).
#
# usage: bash benchmarks/gpu/build_bundle.sh OUTDIR
#   then copy OUTDIR/vllm-bundle.tar (or its parts) and vllm-bundle.sha256 to the GPU host and
#   run: bash benchmarks/gpu/install_bundle.sh DIR_WITH_THEM SITE
#
# 1. pip-downloads the wheels pinned (with sha256) in bundle-wheels.txt: vllm==0.26.0 plus the
#    61 wheels its OpenAI server needs beyond what the host's Python has (torch 2.11.0 with
#    CUDA 13, transformers and their dependencies must be there), for CPython 3.12 manylinux
#    x86_64.
# 2. Trims the vllm wheel into vllm-trim.tar.xz (vllm/ + vllm-0.26.0.dist-info/ at its root),
#    dropping what serving dense models on an H100/H200 (sm90) does not need:
#      vllm/vllm_flash_attn/_vllm_fa2_C*.so           FlashAttention-2 (sm90 uses FA3)
#      vllm/vllm-rs                                    Rust frontend binary
#      vllm/third_party/deep_gemm/_C.cpython-3XX-*.so  all but cpython-312
# 3. Tars ./vllm-trim.tar.xz and ./wheels/*.whl into OUTDIR/vllm-bundle.tar (about 170 MB),
#    or, with PART_SIZE (split -b syntax, e.g. 60M), into OUTDIR/vllm-bundle.tar.part.00, 01,
#    ... for transfers with a size limit; writes their sha256 to OUTDIR/vllm-bundle.sha256.
#    The build is reproducible (sorted names, fixed owners and times).
#
# Env: PY (default python3), PART_SIZE (default: one file), WORK (scratch, default
#      OUTDIR/.work), KEEP_WORK=1 keeps WORK (and the downloaded wheels, so a rebuild skips
#      the download).
# Needs: pip, GNU tar >= 1.30, xz >= 5.4, split, sha256sum. About 1.2 GB of scratch disk.
set -euo pipefail

KIT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUTDIR=${1:-}
[ -n "$OUTDIR" ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
PY=${PY:-python3}
PART_SIZE=${PART_SIZE:-}
WORK=${WORK:-$OUTDIR/.work}
KEEP_WORK=${KEEP_WORK:-0}
LIST="$KIT/bundle-wheels.txt"
say() { echo "[build_bundle $(date -u +%H:%M:%S)] $*"; }

for t in tar xz split sha256sum; do
  command -v "$t" >/dev/null || { echo "ERROR: $t not found" >&2; exit 1; }
done
"$PY" -m pip --version >/dev/null || { echo "ERROR: no pip for $PY" >&2; exit 1; }

mkdir -p "$WORK/dl"
rm -rf "$WORK/trim" "$WORK/stage"
mkdir -p "$WORK/trim" "$WORK/stage/wheels"
rm -f "$OUTDIR"/vllm-bundle.tar "$OUTDIR"/vllm-bundle.tar.part.* "$OUTDIR/vllm-bundle.sha256"

# ------------------------------------------------------------ 1. download
say "pip download of $(grep -c '^[a-z]' "$LIST") pinned wheels into $WORK/dl"
"$PY" -m pip download --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux_2_31_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 \
  --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64 \
  --require-hashes --progress-bar off --disable-pip-version-check \
  -r "$LIST" -d "$WORK/dl"

# Exactly the listed files, vllm apart.
VLLM_WHL=""
n=0
while read -r f; do
  [ -f "$WORK/dl/$f" ] || { echo "ERROR: pip did not produce $f" >&2; exit 1; }
  case "$f" in
    vllm-*) VLLM_WHL="$WORK/dl/$f" ;;
    *) cp -p "$WORK/dl/$f" "$WORK/stage/wheels/$f"; n=$((n + 1)) ;;
  esac
done < <(sed -n 's/^[^#]*#[[:space:]]*\([^[:space:]]*\.whl\).*/\1/p' "$LIST")
[ -n "$VLLM_WHL" ] || { echo "ERROR: no vllm wheel in $LIST" >&2; exit 1; }
say "downloaded and checked: $(basename "$VLLM_WHL") + $n wheels"

# ------------------------------------------------------------ 2. trim vllm
say "unpacking $(basename "$VLLM_WHL") without FA2, vllm-rs and non-cp312 deep_gemm"
EPOCH=$("$PY" - "$VLLM_WHL" "$WORK/trim" <<'PYEOF'
import calendar, os, re, shutil, sys, zipfile

whl, dest = sys.argv[1], sys.argv[2]
DROP = [
    re.compile(r"^vllm/vllm_flash_attn/_vllm_fa2_C[^/]*\.so$"),
    re.compile(r"^vllm/vllm-rs$"),
    re.compile(r"^vllm/third_party/deep_gemm/_C\.cpython-(?!312-)[0-9]+-[^/]*\.so$"),
]
dropped, kept, newest = [], 0, 0
with zipfile.ZipFile(whl) as z:
    for zi in z.infolist():
        name = zi.filename
        if name.startswith("/") or ".." in name.split("/"):
            sys.exit(f"unsafe member {name!r}")
        if any(p.match(name) for p in DROP):
            dropped.append((name, zi.file_size))
            continue
        path = os.path.join(dest, *name.split("/"))
        if name.endswith("/"):
            os.makedirs(path, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(zi) as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        mode = (zi.external_attr >> 16) & 0o7777
        os.chmod(path, mode or 0o644)
        mtime = calendar.timegm(zi.date_time + (0, 0, -1))  # zip times read as UTC
        os.utime(path, (mtime, mtime))
        newest = max(newest, mtime)
        kept += 1
# directories get the newest file time, so the tar does not depend on today
for root, dirs, _ in os.walk(dest, topdown=False):
    os.utime(root, (newest, newest))
for name, size in dropped:
    print(f"  dropped {size / 2**20:8.1f} MiB  {name}", file=sys.stderr)
print(f"  kept {kept} files, dropped {len(dropped)}", file=sys.stderr)
names = [n for n, _ in dropped]
need = ("vllm/vllm-rs", "_vllm_fa2_C")
if len(dropped) != 6 or not all(any(k in n for n in names) for k in need):
    sys.exit("unexpected trim result (expected FA2 .so, vllm-rs and 4 deep_gemm .so)")
print(newest)
PYEOF
)

# shellcheck disable=SC2054  # the commas belong to --mode
TAROPTS=(--sort=name --owner=root:0 --group=root:0 --mode=u+rwX,go=rX)
say "compressing vllm-trim.tar.xz (xz -6, 24 MiB blocks; a few minutes)"
tar "${TAROPTS[@]}" -C "$WORK/trim" -cf - . \
  | xz -6 -T0 --block-size=24MiB -c > "$WORK/stage/vllm-trim.tar.xz"
rm -rf "$WORK/trim"
say "vllm-trim.tar.xz: $(stat -c %s "$WORK/stage/vllm-trim.tar.xz") bytes"

# ------------------------------------------------------------ 3. tar + split
touch -d "@$EPOCH" "$WORK/stage/wheels" "$WORK/stage"
tar "${TAROPTS[@]}" --mtime="@$EPOCH" -C "$WORK/stage" -cf "$WORK/vllm-bundle.tar" .
if [ -n "$PART_SIZE" ]; then
  split -b "$PART_SIZE" -d -a 2 "$WORK/vllm-bundle.tar" "$OUTDIR/vllm-bundle.tar.part."
  rm -f "$WORK/vllm-bundle.tar"
else
  mv "$WORK/vllm-bundle.tar" "$OUTDIR/vllm-bundle.tar"
fi
(cd "$OUTDIR" && sha256sum vllm-bundle.tar* > vllm-bundle.sha256)
say "bundle in $OUTDIR:"
ls -l "$OUTDIR"/vllm-bundle.*
say "on the GPU host: bash benchmarks/gpu/install_bundle.sh DIR_WITH_THESE_FILES SITE"
[ "$KEEP_WORK" = 1 ] || rm -rf "$WORK"
