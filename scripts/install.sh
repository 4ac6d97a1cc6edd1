#!/usr/bin/env bash
# Installs trainclock into ./.venv and fetches the default corpus. With --test, also the test tools.
# Safe to run again: every step skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@"; }
# torch with the torchvision built for it (the image benchmarks need both): the CUDA builds, which
# run on CPU and GPU alike (on this kind of machine pip takes them from disk, about 5.5 GB; the
# CPU-only torch wheel there has no torchvision that imports beside it). aarch64 has a CPU pair.
# A pair that already imports together is kept.
if ! .venv/bin/python -c "import torch, torchvision" 2>/dev/null; then
  case "$(uname -m)" in
    aarch64 | arm64) pip install "torch==2.9.1" "torchvision==0.24.1" ;;
    *) pip install "torch==2.14.1" "torchvision==0.29.1" ;;
  esac
fi
extras=""
[ "${1:-}" = "--test" ] && extras="[test]"
scripts/install_datasets.sh
pip install -e ".${extras}"
.venv/bin/trainclock data fetch
