#!/usr/bin/env bash
# One GPU session on a lent machine (no network): build hot-kernels for the local GPU, run its GPU tests,
# then `hot bench`. Everything worth keeping goes to $OUT (default ./gpu-out). Usage:
#   bash kernels/bench/gpu_session.sh [build] [test] [bench SECTIONS] [variants] [sm90gemm] [clean PRESET]
#                                     [workflow PRESET SECONDS]
# Wheels the machine lacks (torchao) are taken from .whl/ when present. On a compute capability 9.0 GPU the
# build includes the sm_90a INT8 GEMM (HOT_KERNELS_SM90A=1, the g_w default there) unless HOT_KERNELS_SM90A=0 is set.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD/src:$PWD/kernels${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install --quiet --no-deps --no-index --target "$PWD/.whl/site" .whl/*.whl 2>&1 | tail -2 || true
  export PYTHONPATH="$PYTHONPATH:$PWD/.whl/site" PATH="$PWD/.whl/site/bin:$PATH"  # snakemake's command too
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  | tee "$OUT/nvidia-smi.csv"

build() {
  local cap sm90a start
  cap=$("$PY" -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())')
  sm90a=${HOT_KERNELS_SM90A:-$([ "$cap" = 9.0 ] && echo 1 || echo 0)}
  start=$(date +%s)
  # CUTLASS headers: $CUTLASS_DIR if set, else build_config's search (submodule, then the nvidia-cutlass wheel)
  (cd kernels && HOT_KERNELS_SM90A=$sm90a TORCH_CUDA_ARCH_LIST="$cap" MAX_JOBS=${MAX_JOBS:-16} \
    "$PY" setup.py build_ext --inplace >"$OUT/build.log" 2>&1) || { tail -40 "$OUT/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - start )) s for sm_${cap/./} (HOT_KERNELS_SM90A=$sm90a)"
}

# Whether the in-place hot_kernels imports and was built from these kernels/ sources (build_config's record).
current_build() {
  "$PY" -c 'import json, pathlib, sys
import build_config, hot_kernels._C
record = pathlib.Path(hot_kernels.__file__).parent / build_config.BUILD_INFO
sys.exit(json.loads(record.read_text()).get("sources_sha256") != build_config.source_hash())' 2>/dev/null
}

while [ $# -gt 0 ]; do
  case "$1" in
    build) build ;;
    test)
      # The never-run sm90 GEMM in its own process: a sticky CUDA error there cannot fail the other tests.
      timeout "${TEST_TIMEOUT:-300}" "$PY" -m pytest -q -m gpu tests/kernels -p no:cacheprovider \
        --ignore=tests/kernels/test_cutlass_sm90.py --junitxml="$OUT/gpu-tests.xml" >"$OUT/gpu-tests.log" 2>&1 || true
      tail -15 "$OUT/gpu-tests.log"
      timeout 120 "$PY" -m pytest -q -m gpu tests/kernels/test_cutlass_sm90.py -p no:cacheprovider \
        >"$OUT/gpu-tests-sm90.log" 2>&1 || true
      tail -5 "$OUT/gpu-tests-sm90.log"
      ;;
    bench)
      shift
      "$PY" -m hot.cli bench ${BENCH_ARGS:-} --sections "$1" --out "$OUT/hopper-$(echo "$1" | tr ',' '-').json" 2>&1 \
        | tee "$OUT/bench-$(echo "$1" | tr ',' '-').log" | tail -60
      ;;
    variants)
      "$PY" -m hot.cli bench ${BENCH_ARGS:-} --sections stages --out "$OUT/variants.json" 2>&1 | tee "$OUT/variants.log" | tail -40
      ;;
    sm90gemm)
      "$PY" -m hot.cli bench --sections sm90_gemm --out "$OUT/sm90_gemm.json" 2>&1 | tee "$OUT/sm90_gemm.log" | tail -40 \
        || echo "sm90gemm failed (the session goes on)"
      ;;
    clean)
      # A reference run starts from nothing: a lent machine may keep an earlier call's ignored files
      preset=${2:-}
      case "$preset" in
        ""|*/*|.*) echo "clean needs a preset name (gpu, smoke, ...), got '$preset'" >&2; exit 2 ;;
      esac
      rm -rf "results/$preset" "paper_tables/$preset"
      # and that preset's Snakemake logs: the reference folder sums the wall time of every log naming its results
      { grep -l "results/$preset/" .snakemake/log/*.snakemake.log 2>/dev/null || true; } | xargs -r rm -f  # none on a fresh machine
      echo "clean: results/$preset, paper_tables/$preset and their Snakemake logs removed"
      shift
      ;;
    workflow)
      # One piece of a preset's run, resumable: Snakemake is stopped after SECONDS (a lent machine's calls last at
      # most 10 minutes) and the next piece on the same machine goes on where it stopped (killed runs resume from
      # their checkpoints). The piece's log and the preset's small outputs (no .pt) go to $OUT.
      preset=$2 seconds=$3
      shift 2
      if ! command -v hot >/dev/null; then  # the workflow's jobs call the hot command
        "$PY" -m pip install --quiet --no-index --no-deps --no-build-isolation -e . >/dev/null 2>&1 \
          || { echo "pip install -e . failed" >&2; exit 1; }
      fi
      # kernels/ is on PYTHONPATH, so its hot_kernels (without _C on a fresh machine) shadows any other build: the
      # in-place build is the one the workflow's kernels rule finds (and records as found), so it must be of these
      # sources (a warm machine may hold an earlier call's build of another tree)
      current_build || { echo "no in-place hot_kernels build of these sources here: building it first"; build; }
      snakemake --unlock --config preset="$preset" >/dev/null 2>&1 || true
      start=$(date +%s)
      # SIGTERM lets the runs write their checkpoints; whatever still runs 20 s later is killed, so the piece ends
      # in time to pack its outputs (a 600 s call: SECONDS <= 540)
      timeout --kill-after=20 "$seconds" snakemake --cores "${CORES:-16}" --config preset="$preset" --keep-going --rerun-incomplete \
        ${SNAKEMAKE_ARGS:-} >"$OUT/snakemake-$preset-$start.log" 2>&1 || echo "snakemake stopped: exit $?"
      echo "workflow $preset: $(( $(date +%s) - start )) s; $(grep -E 'steps \(' "$OUT/snakemake-$preset-$start.log" | tail -1)"
      tar czf "$OUT/results-$preset.tgz" --exclude='*.pt' "results/$preset" "paper_tables/$preset" .snakemake/log 2>/dev/null || true
      if [ -f "paper_tables/$preset/summary.md" ]; then  # finished: the reference folder, job times and wall time
        "$PY" -m hot.bench.reference_run "results/$preset" "paper_tables/$preset" "$OUT/reference-$preset" \
          --logs $(grep -l "results/$preset/" .snakemake/log/*.snakemake.log) | tail -20
      fi
      ;;
    *) echo "unknown step $1" >&2; exit 2 ;;
  esac
  shift
done
