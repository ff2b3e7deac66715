#!/usr/bin/env bash
# One training run: train.sh METRICS_JSON SETTINGS_JSON [KERNEL_TESTS_JSON]
# With GPUS > 1 in the environment (the rule passes resources.gpu) the run is one torchrun job over that many GPUs;
# with GPUS >= 1 it runs on that many GPUs taken by `hot slots` (it fails at once where fewer exist).
# SETTINGS_JSON becomes the run's config file (settings.json beside metrics.json). A checkpoint left by a killed run
# is resumed only when the settings are unchanged; changed settings start the run afresh.
# With KERNEL_TESTS_JSON (real-quant runs), a run whose kernels were not built or not tested writes
# {"status": "not measured: <reason>"} (and an empty model.pt) instead of training.
set -euo pipefail
metrics=$1 settings=$2 tests=${3:-}
out=$(dirname "$metrics")
mkdir -p "$out"
if [ -n "$tests" ]; then
  reason=$(python - "$tests" <<'PY'
import json, sys
status = json.load(open(sys.argv[1])).get("status", "unknown")
print("" if status == "passed" else status.removeprefix("not run: "))
PY
)
  if [ -n "$reason" ]; then
    echo "real-quant run skipped: $reason"
    python -c 'import json, sys; json.dump({"status": "not measured: " + sys.argv[2]}, open(sys.argv[1], "w"))' \
      "$metrics" "$reason"
    : > "$out/model.pt"
    exit 0
  fi
fi
printf '%s\n' "$settings" > "$out/settings.json.new"
if ! cmp -s "$out/settings.json.new" "$out/settings.json"; then
  rm -f "$out/checkpoint.pt"
fi
mv "$out/settings.json.new" "$out/settings.json"
# hot slots gives the run GPUS devices of its own (CUDA_VISIBLE_DEVICES) and holds them until it ends, so that
# concurrent runs do not share cuda:0 and torchrun's processes span exactly those devices (docs/workflow.md, GPUs).
slots=(hot slots --gpus "${GPUS:-0}" --job "$out" --)
if [ "${GPUS:-0}" -gt 1 ]; then
  exec "${slots[@]}" python -m torch.distributed.run --standalone --nproc_per_node="$GPUS" -m hot.cli train \
    --out "$out" --config "$out/settings.json"
fi
exec "${slots[@]}" hot train --out "$out" --config "$out/settings.json"
