#!/usr/bin/env bash
# One GPU session on a lent machine (no network): build hot-kernels for the local GPU, run its GPU tests,
# then `hot bench`. Everything worth keeping goes to $OUT (default ./gpu-out). Usage:
#   bash kernels/bench/gpu_session.sh [build] [test] [bench SECTIONS] [variants]
# Wheels the machine lacks (torchao) are taken from .whl/ when present.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD/src:$PWD/kernels${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install --quiet --no-deps --no-index --target "$PWD/.whl/site" .whl/*.whl 2>&1 | tail -2 || true
  export PYTHONPATH="$PYTHONPATH:$PWD/.whl/site"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  | tee "$OUT/nvidia-smi.csv"

while [ $# -gt 0 ]; do
  case "$1" in
    build)
      cap=$("$PY" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())')
      start=$(date +%s)
      (cd kernels && TORCH_CUDA_ARCH_LIST="$cap" MAX_JOBS=${MAX_JOBS:-16} CUTLASS_DIR=${CUTLASS_DIR:-$PWD/../.cutlass/include} \
        "$PY" setup.py build_ext --inplace >"$OUT/build.log" 2>&1) || { tail -40 "$OUT/build.log"; exit 1; }
      echo "build: $(( $(date +%s) - start )) s for sm_${cap/./}"
      ;;
    test)
      timeout "${TEST_TIMEOUT:-300}" "$PY" -m pytest -q -m gpu tests/kernels -p no:cacheprovider --junitxml="$OUT/gpu-tests.xml" \
        >"$OUT/gpu-tests.log" 2>&1 || true
      tail -15 "$OUT/gpu-tests.log"
      ;;
    bench)
      shift
      "$PY" -m hot.cli bench ${BENCH_ARGS:-} --sections "$1" --out "$OUT/hopper-$(echo "$1" | tr ',' '-').json" 2>&1 \
        | tee "$OUT/bench-$(echo "$1" | tr ',' '-').log" | tail -60
      ;;
    variants)
      "$PY" kernels/bench/variants.py --out "$OUT/variants.json" 2>&1 | tee "$OUT/variants.log" | tail -40
      ;;
    *) echo "unknown step $1" >&2; exit 2 ;;
  esac
  shift
done
