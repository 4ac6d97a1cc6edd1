#!/usr/bin/env bash
# Installs trainclock into ./.venv and fetches the default corpus. With --test, also the test tools.
# Safe to run again: every step skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip() { .venv/bin/python -m pip --disable-pip-version-check -q "$@"; }
# torch 2.13.0: on this kind of machine pip takes the 1 GB CPU build that lies on disk; elsewhere
# PyPI serves the CUDA build, which runs on CPU and GPU alike. A torch already installed is kept.
.venv/bin/python -c "import torch" 2>/dev/null || pip install "torch==2.13.0"
extras=""
[ "${1:-}" = "--test" ] && extras="[test]"
pip install -e ".${extras}"
.venv/bin/trainclock data fetch
