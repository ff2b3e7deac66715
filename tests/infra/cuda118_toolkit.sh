#!/usr/bin/env bash
# Assemble a CUDA 11.8 compiler (nvcc 11.8.89) without a GPU, a driver or NVIDIA's installer, for
# tests/infra/test_nvcc.py:   tests/infra/cuda118_toolkit.sh DEST   (prints DEST/bin/nvcc)
#
# Where the pieces come from (both registries CI reaches):
#   - Debian bookworm's non-free `nvidia-cuda-toolkit` 11.8.89 (.deb, 84 MB) and `libnvvm4`: nvcc, cudafe++, cicc,
#     ptxas, fatbinary, nvlink. PyPI's nvidia-cuda-nvcc-cu11==11.8.89 has only ptxas, libnvvm and headers, no nvcc
#     driver or front end, so it cannot compile a .cu file by itself. The .debs are fetched with `apt-get download`
#     against a private source list (non-free enabled) and unpacked with dpkg -x: the system's apt setup is untouched
#     and nothing is installed system-wide.
#   - PyPI's nvidia-cuda-runtime-cu11, nvidia-cuda-nvcc-cu11 and nvidia-cuda-cccl-cu11 (11.8.89): the headers
#     (cuda_runtime.h, crt/, and libcu++/CUB/Thrust, which CUTLASS includes as <cuda/std/...>). The cccl 11.8.89
#     wheel is marked yanked on PyPI; an exact == pin still installs it, and its headers are CUDA 11.8's own.
# Host compiler: CUDA 11.8 accepts gcc <= 11; on Debian 12 that is g++-11 (apt-get install g++-11).
set -euo pipefail
DEST=${1:?usage: cuda118_toolkit.sh DEST}
PY=${PYTHON:-python3}
VERSION=11.8.89
if [ -x "$DEST/bin/nvcc" ] && "$DEST/bin/nvcc" --version 2>/dev/null | grep -q "V$VERSION"; then
  echo "$DEST/bin/nvcc"; exit 0
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cuda118.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# 1. nvcc and its tools from Debian (bookworm non-free), without touching the system's apt configuration.
mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial" "$WORK/debs" "$WORK/x"
cat > "$WORK/apt/sources.list" <<'EOF'
deb http://deb.debian.org/debian bookworm main contrib non-free
EOF
APT=(-o "Dir::Etc::SourceList=$WORK/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State::Lists=$WORK/apt/lists" -o "Dir::Cache=$WORK/apt/cache" -o Debug::NoLocking=1
     -o APT::Sandbox::User=root)
apt-get "${APT[@]}" update -qq >/dev/null
(cd "$WORK/debs" && apt-get "${APT[@]}" download -qq "nvidia-cuda-toolkit=$VERSION*" "libnvvm4=$VERSION*" >/dev/null)
for deb in "$WORK"/debs/*.deb; do dpkg -x "$deb" "$WORK/x"; done

# 2. Headers from PyPI.
"$PY" -m pip download -q --no-deps -d "$WORK/wheels" \
  "nvidia-cuda-runtime-cu11==$VERSION" "nvidia-cuda-nvcc-cu11==$VERSION" "nvidia-cuda-cccl-cu11==$VERSION" 2>/dev/null
mkdir -p "$WORK/w"
for whl in "$WORK"/wheels/*.whl; do "$PY" -m zipfile -e "$whl" "$WORK/w"; done

# 3. The standard toolkit layout nvcc expects (bin/, nvvm/, include/), with its own nvcc.profile.
rm -rf "$DEST"; mkdir -p "$DEST/bin/crt" "$DEST/nvvm/bin" "$DEST/nvvm/libdevice" "$DEST/include"
X=$WORK/x/usr
cp "$X/lib/nvidia-cuda-toolkit/bin/nvcc" "$X/bin/cudafe++" "$X/bin/ptxas" "$X/bin/fatbinary" "$X/bin/nvlink" \
   "$X/bin/bin2c" "$X/bin/cuobjdump" "$DEST/bin/"
cp "$X"/lib/nvidia-cuda-toolkit/bin/crt/* "$DEST/bin/crt/"
cp "$X/lib/nvidia-cuda-toolkit/bin/cicc" "$DEST/nvvm/bin/"
cp "$X/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc" "$DEST/nvvm/libdevice/"
for pkg in cuda_runtime cuda_nvcc cuda_cccl; do cp -r "$WORK/w/nvidia/$pkg/include/." "$DEST/include/"; done
rm -f "$DEST/include/__init__.py"
cat > "$DEST/bin/nvcc.profile" <<'EOF'
TOP = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
PATH += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES += "-I$(TOP)/include" $(_SPACE_)
EOF
"$DEST/bin/nvcc" --version | grep -q "V$VERSION"
echo "$DEST/bin/nvcc"
