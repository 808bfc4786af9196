#!/usr/bin/env bash
# The project's GPU checks in one go, for a lent GPU machine (see the developers' guide: one prepared script,
# a timeout that leaves room for a rerun). Two steps:
#
#   bash scripts/gpu_checks.sh prepare   # here: mltrain and its light dependencies as wheels in .gpu-wheels/
#   bash scripts/gpu_checks.sh run       # there (the device tool, carry [".gpu-wheels"]): installs them beside the
#                                        # machine's own torch, runs tests/test_gpu.py, writes $OUT/gpu_checks.txt
#
# The GPU machine reaches no package registry, and it has torch with CUDA already: only what mltrain adds travels
# (a few MB; the carry limit is 64 MiB). What `run` does: nvidia-smi's view of the devices; benchmarks/bench_gpu_feed.py
# (ResNet-50 from JPEGs per input path against the synthetic-data ceiling); tests/test_gpu.py (the GPU pool on the
# machine's real devices with NVML figures, NCCL with one rank and with two where there are two GPUs, the trainer with
# AMP and channels-last, the GPU JPEG path); benchmarks/bench_input.py (the input pipeline alone, every path).
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=.gpu-wheels
case "${1:-}" in
  prepare)
    rm -rf "$WHEELS" build && mkdir -p "$WHEELS"
    PY=${PYTHON:-.venv/bin/python}
    # the versions the tests here run with: this venv's, as `pip freeze` names them. Not pytest and its plugins: the
    # machine has its own, and its `pytest` script fails on another version's modules put before them on the path
    PINS=$("$PY" -m pip freeze 2>/dev/null | grep -iE '^(hydra-core|omegaconf|submitit|cloudpickle|pathspec|psutil|nvidia-ml-py|typing_extensions)==')
    # shellcheck disable=SC2086
    "$PY" -m pip wheel -q --no-deps -w "$WHEELS" . antlr4-python3-runtime==4.9.3 $PINS
    # PyYAML is compiled: the GPU machine's Python (3.12 when last lent) gets its own build
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "${GPU_PYTHON:-3.12}" \
      --platform manylinux2014_x86_64 -d "$WHEELS" "PyYAML==$("$PY" -c 'import yaml; print(yaml.__version__)')"
    rm -rf build
    du -sh "$WHEELS"
    ;;
  run)
    OUT=${OUT:-/tmp/gpu-checks-out}
    mkdir -p "$OUT"
    SITE=$(mktemp -d)
    for wheel in "$WHEELS"/*.whl; do  # one at a time: a wheel built for another Python is skipped, saying so
      python3 -m pip install -q --no-deps --no-index --target "$SITE" "$wheel" 2>/dev/null \
        || echo "skipped $(basename "$wheel"): not for this Python (the machine's own is used)"
    done
    export PYTHONPATH="$SITE" PATH="$SITE/bin:$PATH" PYTHONUNBUFFERED=1
    {
      echo "# $(date -u +%FT%TZ) on $(hostname), $(nproc) CPUs"  # the commit: say it when calling (no .git goes there)
      nvidia-smi -L || true
      python3 -c "import torch, torchvision, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, \
'torchvision', torchvision.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count(), \
torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
    } 2>&1 | tee "$OUT/gpu_checks.txt"
    # Each step time-boxed, the most wanted first, each into its own file under $OUT (what is there comes back
    # even when the call runs past its limit). 1: is the GPU fed (issue 51): ResNet-50 from JPEGs vs the ceiling.
    timeout "${FEED_S:-260}" python3 benchmarks/bench_gpu_feed.py --budget-s "${FEED_BUDGET_S:-190}" ${FEED_ARGS:-} 2>&1 \
      | tee "$OUT/bench_gpu_feed.txt" || echo "bench_gpu_feed exit $?" | tee -a "$OUT/bench_gpu_feed.txt"
    # 2: the project's GPU tests. `pytest`, not `python3 -m pytest`: the checkout stays off sys.path, so the tests
    # use the installed mltrain
    timeout "${TESTS_S:-170}" pytest -p no:cacheprovider -q -s -rs --durations=10 ${TESTS_K:+-k "$TESTS_K"} tests/test_gpu.py 2>&1 \
      | tee "$OUT/test_gpu.txt" || echo "pytest exit $?" | tee -a "$OUT/test_gpu.txt"
    # 3: the input pipeline alone on ImageNet-like JPEGs, every path, as many workers as CPUs (INPUT_S=0: not run)
    [ "${INPUT_S:-80}" = 0 ] || timeout "${INPUT_S:-80}" python3 benchmarks/bench_input.py --images 1500 --width 400 --height 350 --noise 25 \
      --quality 95 --rounds 3 --batch 128 2>&1 | tee "$OUT/bench_input.txt" || echo "bench_input exit $?" | tee -a "$OUT/bench_input.txt"
    ;;
  *)
    echo "usage: bash scripts/gpu_checks.sh prepare|run" >&2
    exit 2
    ;;
esac
