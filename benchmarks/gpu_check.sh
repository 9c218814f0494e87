#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: install the CUDA extra, then run the test suite and the
# gradcheck suite on device "cuda" (CuPy), the attention benchmark against PyTorch's CUDA SDPA
# at N = 4096 and 8192 (target: CuPy flash forward+backward within 3x of PyTorch at 8192),
# and the training job on the GPU for 60 seconds.
# Usage: bash benchmarks/gpu_check.sh   (VENV=path reuses a virtual environment)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-$(mktemp -d)/venv}"
python3 -m venv "$venv"
. "$venv/bin/activate"
pip install --quiet -e ".[test,cuda,ref]"   # ref: PyTorch, for its CUDA SDPA
python -c "import cupy; print('CuPy', cupy.__version__, 'GPUs:', cupy.cuda.runtime.getDeviceCount())"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
echo "== pytest (the device fixture adds 'cuda' when a GPU is present)"
pytest -q
echo "== gradcheck suite on cuda, float64"
python -m gradcheck --device cuda
echo "== attention benchmark on cuda, N = 4096"
python benchmarks/attention_bench.py --device cuda --seq 4096
echo "== attention benchmark on cuda, N = 8192 (dense attention left out: 2 GiB per score array)"
python benchmarks/attention_bench.py --device cuda --seq 8192 --only flash,torch
echo "== minitorch-attn train --device cuda, 60 s"
minitorch-attn train --device cuda --time-budget 60 --out "$(mktemp -d)/run"
