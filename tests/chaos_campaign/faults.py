"""The faults a trial injects, each acting on real processes or the real test cluster."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from typing import Callable, Dict, List, Optional, Tuple

from .scenario import Scenario


def _signal_group(sc: Scenario, sig: signal.Signals) -> str:
    """A terminal's Ctrl-C (or a `kill` of the job) reaches the foreground process group: the command's."""
    assert sc.proc is not None
    if sc.proc.poll() is not None:
        return "the command had already ended"
    os.killpg(sc.proc.pid, sig)
    return f"{sig.name} to the command's process group"


def kill_driver(sc: Scenario, rng: random.Random) -> str:
    assert sc.proc is not None
    if sc.proc.poll() is not None:
        return "the command had already ended"
    sc.proc.kill()
    return "SIGKILL to the mltrain process"


def sigint_foreground(sc: Scenario, rng: random.Random) -> str:
    return _signal_group(sc, signal.SIGINT)


def sigterm_foreground(sc: Scenario, rng: random.Random) -> str:
    return _signal_group(sc, signal.SIGTERM)


def _kill_one(sc: Scenario, rng: random.Random, find: Callable[[], List[Tuple[str, int]]], what: str,
              attribute: str, wait_s: float = 20.0) -> str:
    """SIGKILL of one of the processes `find` lists (drawn by the seed), waiting for one to exist."""
    deadline = time.monotonic() + wait_s
    found: List[Tuple[str, int]] = []
    while time.monotonic() < deadline:
        found = sorted(find())
        if found or (sc.proc is not None and sc.proc.poll() is not None):
            break
        time.sleep(0.05)
    if not found:
        return f"no {what} was running"
    unit, pid = found[rng.randrange(len(found))]
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError as e:
        return f"the {what} of {unit} had ended ({e.strerror})"
    setattr(sc, attribute, unit)
    return f"SIGKILL to the {what} of {unit} (pid {pid})"


def kill_rank(sc: Scenario, rng: random.Random) -> str:
    return _kill_one(sc, rng, sc.running_rank_pids, "rank", "killed_member")  # type: ignore[attr-defined]


def kill_worker(sc: Scenario, rng: random.Random) -> str:
    return _kill_one(sc, rng, sc.worker_pids, "worker", "killed_worker")  # type: ignore[attr-defined]


def kill_server(sc: Scenario, rng: random.Random) -> str:
    return _kill_one(sc, rng, sc.server_pids, "server", "killed_server")  # type: ignore[attr-defined]


def kill_packed_worker(sc: Scenario, rng: random.Random) -> str:
    return _kill_one(sc, rng, sc.packed_worker_pids, "packed worker", "killed_worker")  # type: ignore[attr-defined]


def _slurm(sc: Scenario, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SLURM_CONF": sc.t.slurm_conf or ""})


def restart_slurmctld(sc: Scenario, rng: random.Random) -> str:
    """slurmctld stopped (SIGTERM, as systemctl would) and started again."""
    conf = sc.t.slurm_conf or ""
    pidfile = os.path.join(os.path.dirname(os.path.dirname(conf)), "run", "slurmctld.pid")
    try:
        pid = int(open(pidfile).read().split()[0])
    except (OSError, ValueError, IndexError):
        return f"slurmctld's pidfile {pidfile} was not found"
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.05)
    started = time.monotonic()
    subprocess.run(["slurmctld"], check=True, timeout=60, env={**os.environ, "SLURM_CONF": conf})
    while time.monotonic() < started + 60 and _slurm(sc, "scontrol", "ping").stdout.count("UP") == 0:
        time.sleep(0.1)
    return f"slurmctld restarted (away {time.monotonic() - started:.1f} s)"


def requeue(sc: Scenario, rng: random.Random) -> str:
    """`scontrol requeue` of one of the trial's running Slurm jobs, drawn by the seed."""
    deadline = time.monotonic() + 20
    jobs: List[str] = []
    while time.monotonic() < deadline:
        jobs = sorted(line.split("|")[0] for line in sc.t.slurm_jobs() if "|RUNNING|" in line)
        if jobs or (sc.proc is not None and sc.proc.poll() is not None):
            break
        time.sleep(0.1)
    if not jobs:
        return "no Slurm job of the trial was running"
    job = jobs[rng.randrange(len(jobs))]
    p = _slurm(sc, "scontrol", "requeue", job)
    return f"scontrol requeue {job}" + (f" ({p.stderr.strip()})" if p.returncode else "")


def full_disk(sc: Scenario, rng: random.Random) -> str:
    return sc.t.fill_disk()


def lose_node(sc: Scenario, rng: random.Random) -> str:
    """The node the trial's job runs on dies as a machine does (every process in its namespace killed)."""
    from slurm_support import kill_node  # the two-node test cluster's own helper (tests/slurm_support.py)

    deadline = time.monotonic() + 30
    nodes: List[str] = []
    while time.monotonic() < deadline and not nodes:
        p = _slurm(sc, "squeue", "-h", "-t", "RUNNING", "-o", "%Z|%N")
        nodes = sorted({line.split("|")[1] for line in p.stdout.splitlines()
                        if line.split("|")[0].startswith(str(sc.t.root)) and line.split("|")[1]})
        if sc.proc is not None and sc.proc.poll() is not None:
            break
        time.sleep(0.1)
    if not nodes:
        return "no job of the trial was running on a node"
    node = nodes[rng.randrange(len(nodes))]
    killed = kill_node(sc.t.slurm_conf or "", node)
    sc.lost_node = node  # type: ignore[attr-defined]
    return f"node {node} lost ({killed} processes killed)"


FAULTS: Dict[str, Callable[[Scenario, random.Random], str]] = {
    f.__name__: f for f in (kill_driver, sigint_foreground, sigterm_foreground, kill_rank, kill_worker, kill_server,
                            kill_packed_worker, restart_slurmctld, requeue, full_disk, lose_node)}


def inject(name: str, sc: Scenario, rng: random.Random) -> str:
    fault: Optional[Callable[[Scenario, random.Random], str]] = FAULTS.get(name)
    if fault is None:
        raise KeyError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}")
    return fault(sc, rng)
