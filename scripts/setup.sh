#!/usr/bin/env bash
# Set-up for a fresh machine: a virtual environment in .venv with mltrain and its dependencies.
# Safe to re-run; it reinstalls mltrain itself from this checkout every time.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
# setuptools reuses build/lib between builds: a module deleted from the checkout would ship again.
rm -rf build
# torch is not pinned: torchvision pulls the torch build it was made for (see SPEC section 8).
# the docs extra: tests/test_docs_site.py builds the documentation site with MkDocs
.venv/bin/python -m pip install -q ".[test,docs]"
# A non-editable install: Hydra finds launcher plugins only in a real hydra_plugins package folder.
.venv/bin/python -m pip install -q --no-deps --force-reinstall .
rm -rf build
echo "mltrain is installed in $(pwd)/.venv (activate it: source .venv/bin/activate)"
