#!/usr/bin/env bash
# The test command (README): sets everything up on a fresh machine, then runs the whole suite.
#   - the virtual environment and packages (scripts/setup.sh);
#   - as root on Debian: Open MPI, chromium (the UI test's browser), and a real single-node Slurm cluster
#     with accounting (scripts/slurm_cluster.sh), stopped again when the tests end.
# Under CI (CI=true) the Slurm, MPI and UI tests must run: a missing cluster or mpirun fails them
# instead of skipping. Extra arguments go to pytest, e.g. `bash scripts/test.sh -k dry_run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# the azure extra (azure-ai-ml, azure-identity) for tests/test_azureml_sdk_v2*.py, and mldesigner (the
# @command_component of Azure's pipeline notebooks) for its test there; a no-op once installed
.venv/bin/python -m pip install -q azure-ai-ml azure-identity mldesigner

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  if ! command -v mpirun >/dev/null; then
    echo "installing Open MPI (Debian openmpi-bin)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends openmpi-bin libopenmpi-dev >/tmp/mltrain-apt-mpi.log 2>&1 \
      || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends openmpi-bin libopenmpi-dev >>/tmp/mltrain-apt-mpi.log 2>&1; }
  fi
  SLURM_DIR=${MLTRAIN_SLURM_DIR:-/tmp/mltrain-slurm-test}
  # fresh state: job ids restart at 1, so nothing stale is reused; a cluster left running is stopped first
  bash scripts/slurm_two_nodes.sh stop "${MLTRAIN_SLURM2_DIR:-/tmp/mltrain-slurm2-test}" >/dev/null 2>&1 || true
  bash scripts/slurm_cluster.sh stop "$SLURM_DIR" >/dev/null 2>&1 || true
  rm -rf "$SLURM_DIR"
  bash scripts/slurm_cluster.sh start "$SLURM_DIR"
  SLURM2_DIR=${MLTRAIN_SLURM2_DIR:-/tmp/mltrain-slurm2-test}
  trap 'bash scripts/slurm_two_nodes.sh stop "$SLURM2_DIR" >/dev/null 2>&1 || true
        bash scripts/slurm_cluster.sh stop "$SLURM_DIR" >/dev/null 2>&1 || true' EXIT
  # A second cluster of two nodes (network namespaces on this machine) for node_count=2.
  rm -rf "$SLURM2_DIR"
  MLTRAIN_SLURM_DIR="$SLURM_DIR" bash scripts/slurm_two_nodes.sh start "$SLURM2_DIR" \
    && export MLTRAIN_SLURM2_CONF="$SLURM2_DIR/etc/slurm.conf"
  # shellcheck disable=SC1091
  source "$SLURM_DIR/env.sh"
  # A "remote" cluster login over ssh (issue 65): sshd on a loopback port, another local user, the cluster above.
  # Its Python is the system's (a cluster's admin-installed one), not this venv: mltrain sends itself there.
  REMOTE_DIR=${MLTRAIN_REMOTE_SSH_DIR:-/tmp/mltrain-remote-ssh}
  trap 'bash scripts/remote_ssh.sh stop "$REMOTE_DIR" >/dev/null 2>&1 || true
        bash scripts/slurm_two_nodes.sh stop "$SLURM2_DIR" >/dev/null 2>&1 || true
        bash scripts/slurm_cluster.sh stop "$SLURM_DIR" >/dev/null 2>&1 || true' EXIT
  REMOTE_PYTHON=/usr/bin/python3 bash scripts/remote_ssh.sh start "$REMOTE_DIR"
  # shellcheck disable=SC1091
  source "$REMOTE_DIR/env.sh"
  # Debian's chromium for the `mltrain ui` test (Playwright drives it; it downloads no browser of its own).
  if ! command -v chromium >/dev/null; then
    echo "installing chromium (Debian) for the UI test"
    apt-get install -y -q --no-install-recommends chromium >/tmp/mltrain-apt-chromium.log 2>&1 \
      || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium >>/tmp/mltrain-apt-chromium.log 2>&1; }
  fi
  for tool in cmake g++; do
    command -v "$tool" >/dev/null || { apt-get install -y -q --no-install-recommends "$tool" >/tmp/mltrain-apt-build.log 2>&1 \
      || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "$tool" >>/tmp/mltrain-apt-build.log 2>&1; }; }
  done
fi
# Horovod against this torch: built once (a few minutes), then reused from $MLTRAIN_HOME/wheels.
if command -v mpicxx >/dev/null; then
  .venv/bin/mltrain horovod build || echo "Horovod was not built; its tests will say why"
fi
if [ "${CI:-}" = "true" ]; then
  export MLTRAIN_REQUIRE_SLURM=1 MLTRAIN_REQUIRE_MPI=1 MLTRAIN_REQUIRE_HOROVOD=1 MLTRAIN_REQUIRE_UI=1
fi
# A whole run, its set-up included (the venv's CUDA build of torch is most of 7 GB), took up to 18 GB of the
# temporary folder's disk at once (2026-11-28, df every 15 s). A full disk fails tests by the hundred, each
# with "No space left on device" (the CI of 2026-11-28, on a disk left 6.9 GB free): say so once, up front.
free_gb=$(df -P -k "${TMPDIR:-/tmp}" 2>/dev/null | awk 'NR==2 {print int($4 / 1048576)}' || true)
if [ -n "$free_gb" ] && [ "$free_gb" -lt 25 ]; then
  echo "warning: ${free_gb} GB free under ${TMPDIR:-/tmp}; a whole run has needed up to 18 GB there at once" >&2
fi
# `pytest` (not `python -m pytest`) keeps the checkout off sys.path: tests use the installed wheel.
# Two pytest-xdist workers (MLTRAIN_TEST_WORKERS): most tests wait on real processes, so two at once on
# 2 cores took 18 min where one at a time took 30 (2026-11-26); every test that uses the Slurm clusters
# runs on one worker, one after another (tests/conftest.py: some reconfigure or restart the cluster).
# A worker that dies ends the run (--max-worker-restart 0): xdist does not deal a dead worker's group
# to another, and the run would otherwise wait for it until CI's time is up.
.venv/bin/pytest -p no:cacheprovider -q --durations=25 -n "${MLTRAIN_TEST_WORKERS:-2}" --dist loadgroup \
  --max-worker-restart 0 "$@"
