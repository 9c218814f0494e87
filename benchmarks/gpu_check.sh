#!/usr/bin/env bash
# The check of minitorch-attn on an NVIDIA GPU (device "cuda", CuPy), for a machine with no
# network: it uses the python3 it finds (with its numpy, cupy, torch, pytest, hypothesis,
# pytest-xdist, matplotlib), runs the project from this source tree (PYTHONPATH, nothing is
# installed into that python), and installs the few pure-Python packages it lacks from
# wheels carried in benchmarks/wheels/ into a folder of its own.
#
#   bash benchmarks/gpu_check.sh --fetch-wheels   # with network, before: the wheels into benchmarks/wheels/
#   bash benchmarks/gpu_check.sh --dry-run        # anywhere: every step printed, what needs no GPU checked
#   bash benchmarks/gpu_check.sh                  # on the GPU machine: the check (under 10 minutes)
#
# Stages, each under its own time limit (seconds, overridable: PYTEST_S=... GRADCHECK_S=...):
#   pytest      the suite's device tests on cuda (-m cuda), their count and failures     PYTEST_S=170
#   gradcheck   the gradcheck suite on cuda in float64                                  GRADCHECK_S=120
#   attention   flash and dense attention fwd+bwd against torch's CUDA SDPA at N = 4096
#               and 8192 (B1 H8 d64 float32): time and peak device memory             ATTENTION_S=90
#   step        a training step of the default GPT against its PyTorch twin on the GPU    STEP_S=60
#   train       minitorch-attn train --device cuda --time-budget 60 (bits/char)          TRAIN_S=120
# Figures and logs go to $OUT (default benchmarks/gpu_out/<UTC date-time>): env.txt, one
# <stage>.log per stage, attention.txt/.json, step.txt/.json, train/metrics.json, and
# summary.txt (each stage's exit status and seconds; 124 = its time limit ran out).
# PYTHON=... picks the interpreter (default python3).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
WHEELS=benchmarks/wheels
# module to import : the requirement of setup.cfg that provides it (install_requires and the
# test extra, less what the GPU machine has: numpy, pytest, hypothesis, pytest-xdist, matplotlib)
CARRIED=(
  "array_api_compat:array-api-compat>=1.9"
  "tqdm:tqdm>=4.60"
  "threadpoolctl:threadpoolctl>=3.1"
  "array_api_strict:array-api-strict>=2.2"
  "graphviz:graphviz>=0.20"
  "safetensors:safetensors>=0.4"
  "pytest_timeout:pytest-timeout>=2.1"
  "expecttest:expecttest>=0.1"
)
MODE=run
case "${1:-}" in
  --dry-run) MODE=dry ;;
  --fetch-wheels) MODE=fetch ;;
  "") ;;
  *) echo "usage: bash benchmarks/gpu_check.sh [--dry-run | --fetch-wheels]" >&2; exit 2 ;;
esac

wheel_of() {  # the carried wheel of a distribution name (dashes or underscores), or nothing
  local stem="${1//-/_}"
  ls "$WHEELS"/*.whl 2>/dev/null | grep -i "/${stem}-[0-9]" | sort | tail -n 1
}

if [ "$MODE" = fetch ]; then
  # safetensors is compiled (Rust) but built for the stable ABI (cp38-abi3): one wheel for every
  # CPython 3.8+ on the platform of this machine (x86_64 Linux, as the GPU machine)
  mkdir -p "$WHEELS"
  specs=(); for entry in "${CARRIED[@]}"; do specs+=("${entry#*:}"); done
  set -x
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --dest "$WHEELS" "${specs[@]}"
  exit $?
fi

OUT="${OUT:-benchmarks/gpu_out/$(date -u +%Y%m%d-%H%M%S)}"
[ "$MODE" = dry ] && OUT="$OUT/dry-run"
mkdir -p "$OUT"
SITE="$(mktemp -d)/site"   # the carried packages, outside $OUT (which travels back)
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export MPLBACKEND=Agg
failed=0

say() { echo "== $*"; }

stage() {  # stage NAME SECONDS COMMAND...: run it under its limit, log to $OUT/NAME.log, note it
  local name="$1" limit="$2"; shift 2
  say "$name (limit ${limit} s): $*"
  if [ "$MODE" = dry ]; then return 0; fi
  local start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$OUT/$name.log"
  echo "$name rc=$rc seconds=$((SECONDS - start))" | tee -a "$OUT/summary.txt"
  [ $rc -eq 0 ] || failed=1
}

# ---- 1. the interpreter and what it has -------------------------------------------------------------
say "interpreter: $(command -v "$PY") ($("$PY" --version 2>&1)); output folder: $OUT"
"$PY" - <<'EOF' | tee "$OUT/env.txt"
import importlib, platform
print("python", platform.python_version(), platform.machine())
for name in ("numpy", "cupy", "torch", "pytest", "hypothesis", "xdist", "matplotlib"):
    try:
        print(name, getattr(importlib.import_module(name), "__version__", "?"))
    except Exception as exc:
        print(name, "MISSING:", type(exc).__name__, exc)
EOF
command -v timeout > /dev/null || { echo "the timeout command (coreutils) is missing" >&2; exit 1; }
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$OUT/env.txt"
else
  echo "nvidia-smi: not found" | tee -a "$OUT/env.txt"
fi

# ---- 2. the carried wheels, for what is missing ------------------------------------------------------
missing=0
for entry in "${CARRIED[@]}"; do
  module="${entry%%:*}" spec="${entry#*:}" dist="${spec%%[<>=!~]*}"
  wheel="$(wheel_of "$dist")"
  if [ -z "$wheel" ]; then
    echo "no wheel of $dist in $WHEELS/: run 'bash benchmarks/gpu_check.sh --fetch-wheels' where there is network"
    missing=1
    continue
  fi
  # the dry run installs every wheel (to prove each provides its module); the real run only the missing
  if [ "$MODE" = dry ] || ! "$PY" -c "import $module" 2> /dev/null; then
    say "install $(basename "$wheel") into $SITE"
    "$PY" -m pip install --quiet --no-index --no-deps --disable-pip-version-check --target "$SITE" "$wheel" \
      || "$PY" -m zipfile -e "$wheel" "$SITE" || missing=1     # a wheel is a zip: without pip, unpacked
  fi
  where="$("$PY" -c "import $module; print($module.__file__)" 2>&1)" || { echo "import $module failed: $where"; missing=1; }
  echo "$module: $where"
done
[ $missing -eq 0 ] || { echo "a package is missing (above): stopping" >&2; exit 1; }
"$PY" -c "import minitorch_attn, sys; print('minitorch_attn from', minitorch_attn.__file__)" || exit 1

# ---- 3. the GPU -------------------------------------------------------------------------------------
if [ "$MODE" = dry ]; then
  say "dry run: what needs no GPU"
  "$PY" -m pytest --collect-only -q -m cuda -n 0 -p no:cacheprovider 2>&1 | tail -n 1 | tee "$OUT/cuda_tests.txt"
  "$PY" -m gradcheck --help > /dev/null && echo "python -m gradcheck: its command line parses"
  "$PY" -m minitorch_attn.app.cli train --help > /dev/null && echo "python -m minitorch_attn.app.cli train: its command line parses"
  "$PY" benchmarks/gpu_bench.py --device cpu --out "$OUT" attention --seq 128 --repeats 1 || failed=1
  "$PY" benchmarks/gpu_bench.py --device cpu --out "$OUT" step --steps 2 --warmup 1 || failed=1
else
  "$PY" -c "import cupy; n = cupy.cuda.runtime.getDeviceCount(); assert n > 0; print('CuPy', cupy.__version__, 'GPUs:', n)" \
    | tee -a "$OUT/env.txt" || { echo "no usable CUDA GPU through CuPy: stopping" >&2; exit 1; }
fi

# ---- 4. the stages ----------------------------------------------------------------------------------
stage pytest "${PYTEST_S:-170}" "$PY" -m pytest -q -m cuda -n 8 --timeout 120 -p no:cacheprovider
stage gradcheck "${GRADCHECK_S:-120}" "$PY" -m gradcheck --device cuda --dtype float64
stage attention "${ATTENTION_S:-90}" "$PY" benchmarks/gpu_bench.py --device cuda --out "$OUT" attention --seq 4096 8192
stage step "${STEP_S:-60}" "$PY" benchmarks/gpu_bench.py --device cuda --out "$OUT" step
stage train "${TRAIN_S:-120}" "$PY" -m minitorch_attn.app.cli train --device cuda --time-budget 60 --out "$OUT/train"
if [ "$MODE" = run ] && [ -f "$OUT/train/metrics.json" ]; then
  "$PY" -c "import json,sys; m = json.load(open(sys.argv[1])); print('train: val_bpc', m['val_bpc'], 'tokens/s', round(m['tokens_per_s']), 'steps', m['steps'])" \
    "$OUT/train/metrics.json" | tee -a "$OUT/summary.txt"
fi
say "done ($MODE); figures in $OUT"
exit $failed
