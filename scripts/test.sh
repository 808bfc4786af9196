#!/usr/bin/env bash
# The test command (README): sets everything up on a fresh machine, then runs the whole suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k dry_run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# `pytest` (not `python -m pytest`) keeps the checkout off sys.path: tests use the installed wheel.
exec .venv/bin/pytest -p no:cacheprovider -q "$@"
