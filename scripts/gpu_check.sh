#!/usr/bin/env bash
# GPU checks for a machine with CUDA, run from the repository root without installing:
#   OUT=results-dir bash scripts/gpu_check.sh
# 1. the CUDA tests (DevicePrefetcher against the CPU path, nvJPEG batch decode) if pytest is there;
# 2. the ablation v1-v8 with a ResNet-50 step, on 2,000 photo-like images; JSON + PNG under $OUT.
set -uo pipefail
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
export PYTHONPATH=.
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0))" || exit 1
if python3 -c "import pytest" 2>/dev/null; then
  python3 -m pytest -q -p no:cacheprovider -m cuda tests/device/test_transfer.py tests/decode/test_decoders.py tests/workers/test_shared_slots.py 2>&1 | tee "$OUT/gpu_tests.txt"
else
  echo "pytest not installed: CUDA tests not run" | tee "$OUT/gpu_tests.txt"
fi
DATA=${DATA:-/tmp/labkit-gpu/photos}
LABKIT_QUICK=0 python3 -m labkit data --out "$DATA" --n 2000 --no-progress
LABKIT_QUICK=0 python3 -m labkit ablation --data "$DATA" --device cuda --no-progress \
  --json "$OUT/ablation_gpu.json" --plot "$OUT/ablation_gpu.png" 2>&1 | tee "$OUT/ablation_gpu.txt"
LABKIT_QUICK=0 python3 -m labkit ablation --data "$DATA" --device cuda --model --runs 3 --steps 10 --no-progress \
  --json "$OUT/ablation_gpu_resnet50.json" --plot "$OUT/ablation_gpu_resnet50.png" 2>&1 | tee "$OUT/ablation_gpu_resnet50.txt"
