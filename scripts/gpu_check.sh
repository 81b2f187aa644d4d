#!/usr/bin/env bash
# GPU checks for a machine with CUDA, run from the repository root without installing labkit and without a network:
#   OUT=results-dir bash scripts/gpu_check.sh
# 0. wheels carried in $WHEELS (default .whl/; e.g. simplejpeg's for the machine's Python, which a bare PyTorch image
#    lacks) are installed into a private folder first: no index is asked;
# 1. the CUDA tests (DevicePrefetcher against the CPU path, nvJPEG batch decode, batch crops, pinned slots) where
#    pytest is installed;
# 2. the ablation v1-v8 on $N photo-like images (default 2000), data only and then with a ResNet-50 step;
#    text, JSON and PNG under $OUT.
# DEVICE=cpu runs the same steps on a CPU with no CUDA (the tests skip theirs): CI does so on a few images, so the
# script cannot rot between GPU machines. RUNS and STEPS size the ablation (defaults 3 x 20, and 2 x 10 with the
# model) to finish in under 8 minutes on one GPU with 16 CPUs.
set -uo pipefail
OUT=${OUT:-benchmarks/results}
DEVICE=${DEVICE:-cuda}
N=${N:-2000}
RUNS=${RUNS:-3}
STEPS=${STEPS:-20}
WHEELS=${WHEELS:-.whl}
mkdir -p "$OUT"
export PYTHONPATH=.
if compgen -G "$WHEELS/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/labkit-site \
    "$WHEELS"/*.whl || exit 1
  export PYTHONPATH=.:/tmp/labkit-site
fi
if [ "$DEVICE" = cuda ]; then
  python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0))" \
    | tee "$OUT/gpu_device.txt" || exit 1
fi
python3 -m labkit doctor | tee "$OUT/gpu_doctor.txt"
if python3 -c "import pytest" 2>/dev/null; then
  # every test marked cuda, wherever it lives (no hand-kept list of files to go stale)
  python3 -m pytest -q -p no:cacheprovider -m cuda tests 2>&1 | tee "$OUT/gpu_tests.txt"
else
  echo "pytest not installed: CUDA tests not run" | tee "$OUT/gpu_tests.txt"
fi
DATA=${DATA:-/tmp/labkit-gpu/photos-$N}
mkdir -p "$(dirname "$DATA")"
LABKIT_QUICK=0 python3 -m labkit data --out "$DATA" --n "$N" --no-progress || exit 1
LABKIT_QUICK=0 python3 -m labkit ablation --data "$DATA" --device "$DEVICE" --runs "$RUNS" --steps "$STEPS" \
  --no-progress --json "$OUT/ablation_gpu.json" --plot "$OUT/ablation_gpu.png" 2>&1 | tee "$OUT/ablation_gpu.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
LABKIT_QUICK=0 python3 -m labkit ablation --data "$DATA" --device "$DEVICE" --model --runs "$((RUNS > 2 ? 2 : RUNS))" \
  --steps "$((STEPS > 10 ? 10 : STEPS))" --no-progress --json "$OUT/ablation_gpu_resnet50.json" \
  --plot "$OUT/ablation_gpu_resnet50.png" 2>&1 | tee "$OUT/ablation_gpu_resnet50.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
