#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: install the CUDA extra, then run the test suite and the
# gradcheck suite on device "cuda" (CuPy). Usage: bash benchmarks/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-$(mktemp -d)/venv}"
python3 -m venv "$venv"
. "$venv/bin/activate"
pip install --quiet -e ".[test,cuda]"
python -c "import cupy; print('CuPy', cupy.__version__, 'GPUs:', cupy.cuda.runtime.getDeviceCount())"
echo "== pytest (the device fixture adds 'cuda' when a GPU is present)"
pytest -q
echo "== gradcheck suite on cuda, float64"
python -m gradcheck --device cuda
for script in benchmarks/attention_bench.py; do
  [ -f "$script" ] && { echo "== $script --device cuda"; python "$script" --device cuda; }
done
