#!/usr/bin/env bash
# The hot-kernels extension: build it, or test it, and record the outcome as {"status": ...} JSON.
#   kernels.sh build MODE OUT.json          MODE: auto (only where a CUDA GPU is visible) | always | never
#   kernels.sh test BUILD.json OUT.json JUNIT.xml
# Without a GPU nothing is built or run and the status says why ("not built: no GPU"); a failed test run is
# recorded ("failed: ...") for the summary to show, and real-quant runs then do not train.
set -euo pipefail
status() { python -c 'import json, sys; json.dump({"status": sys.argv[2]}, open(sys.argv[1], "w"))' "$1" "$2"; }
has_gpu() { python -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; }

case "$1" in
  build)
    mode=$2 out=$3
    if [ "$mode" = never ]; then status "$out" "not built: disabled in config (kernels.build: never)"
    elif [ ! -d kernels ]; then status "$out" "not built: no kernels/ directory"
    elif [ "$mode" = auto ] && ! has_gpu; then status "$out" "not built: no GPU"
    else
      python -m pip install --no-build-isolation ./kernels
      status "$out" built
    fi ;;
  test)
    build=$2 out=$3 junit=$4
    built=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["status"])' "$build")
    if [ "$built" != built ]; then status "$out" "not run: ${built#not built: }"
    elif ! has_gpu; then status "$out" "not run: no GPU"
    elif python -m pytest -m gpu tests/kernels --junitxml="$junit"; then status "$out" passed
    else status "$out" "failed: see the kernel_tests log"
    fi ;;
  *) echo "usage: kernels.sh build MODE OUT | test BUILD OUT JUNIT" >&2; exit 2 ;;
esac
