"""scripts/slurm_cluster.sh itself (issue 67): its stop finds the daemons of a cluster whose folder was removed
while they ran (they kept their ports, and the next start could not bind them), and its start on a port another
process holds says which, in one line, instead of waiting for READY until it times out.

Each test starts its own cluster in its own folder on ports of its own (SLURM_PORT_BASE, MARIADB_PORT): the
shared test clusters (/tmp/mltrain-slurm-test, /tmp/mltrain-slurm2-test) are never touched."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest
from support import free_port, require

# its own cluster, not the shared one; but in the Slurm group (tests/conftest.py), one Slurm test at a time
pytestmark = pytest.mark.slurm

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "slurm_cluster.sh"
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd")


def _problem() -> str | None:
    if os.geteuid() != 0 or not shutil.which("dpkg-query"):
        return "scripts/slurm_cluster.sh needs root on Debian (it installs and starts the daemons)"
    return None


@pytest.fixture
def cluster():
    """A folder (short: munge's and PMIx's socket paths must fit in 108 bytes), ports (slurmctld, slurmd,
    slurmdbd, mariadb: four in a row) and `run(cmd)`; whatever it started is gone afterwards."""
    require(_problem(), "MLTRAIN_REQUIRE_SLURM", "Slurm")
    folder = Path(tempfile.mkdtemp(prefix="mlt67-", dir="/tmp"))
    base = free_port(4)
    env = {k: v for k, v in os.environ.items() if k not in ("SLURM_CONF", "MLTRAIN_SLURM_DIR")}
    env.update(SLURM_PORT_BASE=str(base), MARIADB_PORT=str(base + 3), SLURM_GPUS="0", SLURM_CPUS="2")
    started: dict[int, str] = {}

    def run(cmd: str, timeout: float = 180) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(["bash", str(SCRIPT), cmd, str(folder)], env=env, capture_output=True, text=True,
                                  timeout=timeout)
        finally:
            started.update(_daemons(folder))

    try:
        yield folder, base, run
    finally:
        if folder.exists():
            run("stop", timeout=60)
        # by their ids, whatever the script under test did: a stop that missed them must not leave them running
        for pid, name in started.items():
            if _name(pid) == name:
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


def _daemons(folder: Path) -> dict[int, str]:
    found = {}
    for name in DAEMONS:
        try:
            found[int((folder / "run" / f"{name}.pid").read_text().strip())] = name
        except (OSError, ValueError):
            pass
    return found


def _name(pid: int) -> str | None:
    """The process's name, None once it has exited (a zombie has: its sockets are closed)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return None if stat.rsplit(")", 1)[1].split()[0] == "Z" else Path(f"/proc/{pid}/comm").read_text().strip()


def _free(port: int) -> bool:
    """Whether a daemon could listen on the port now (as they do: SO_REUSEADDR, any address)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError:
            return False
    return True


@pytest.mark.slow
def test_stop_finds_the_daemons_of_a_removed_folder_and_frees_their_ports(cluster):
    folder, base, run = cluster
    first = run("start")
    assert first.returncode == 0 and "READY" in first.stdout, first.stdout + first.stderr
    daemons = _daemons(folder)
    assert sorted(daemons.values()) == sorted(DAEMONS)
    ports = [base, base + 1, base + 2, base + 3]
    assert not any(_free(p) for p in ports)

    shutil.rmtree(folder)  # while they run: the pidfiles go with it
    stop = run("stop", timeout=60)
    assert stop.returncode == 0, stop.stderr
    assert {name for pid, name in daemons.items() if _name(pid) == name} == set()
    assert [p for p in ports if not _free(p)] == []

    again = run("start")  # the same folder and ports
    assert again.returncode == 0 and "READY" in again.stdout, again.stdout + again.stderr
    stop = run("stop", timeout=60)
    assert stop.returncode == 0, stop.stderr
    assert all(_free(p) for p in ports)


def test_start_on_a_taken_port_says_which_and_whose_in_one_line(cluster):
    folder, base, run = cluster
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", base))  # slurmctld's
        holder.listen()
        out = run("start", timeout=60)
    assert out.returncode != 0
    assert out.stderr.splitlines() == [
        f"[slurm_cluster] error: port {base} (for slurmctld) is taken by pid {os.getpid()} ({_name(os.getpid())}): "
        "stop it, or choose other ports (SLURM_PORT_BASE, MARIADB_PORT)"]
    assert _daemons(folder) == {}  # nothing was started
