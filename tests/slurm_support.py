"""Access to the real Slurm cluster the test command starts (scripts/slurm_cluster.sh).

Outside CI, without a cluster, Slurm tests skip with one line; in CI (MLTRAIN_REQUIRE_SLURM=1,
set by scripts/test.sh) a missing cluster is an error, never a skip.
"""
from __future__ import annotations

import os
import shutil
import subprocess

from support import require


def cluster_problem() -> str | None:
    if not shutil.which("sbatch") or not os.environ.get("SLURM_CONF"):
        return "no Slurm cluster: run `bash scripts/slurm_cluster.sh start` and source its env.sh"
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sinfo failed: {exc}"
    if out.returncode != 0 or not out.stdout.strip():
        return f"Slurm controller not answering: {out.stderr.strip()}"
    return None


def require_cluster() -> None:
    require(cluster_problem(), "MLTRAIN_REQUIRE_SLURM", "Slurm")


def sacct_settles(job_id: str, timeout: float = 30) -> str:
    """The job's state once accounting has a final one. mltrain reports a run Completed from its ranks'
    own reports, which can be a moment before slurmdbd has recorded the job's end."""
    import time

    deadline = time.monotonic() + timeout
    state = sacct(job_id)
    while state in ("PENDING", "RUNNING", "COMPLETING", "") and time.monotonic() < deadline:
        time.sleep(0.2)
        state = sacct(job_id)
    return state


def sacct(job_id: str) -> str:
    out = subprocess.run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State"], capture_output=True, text=True)
    return out.stdout.split("\n")[0].split(" ")[0].strip()


# ---------------------------------------------------------------- faults: the cluster's daemons stopped and started
# The fault tests (tests/test_faults_slurm.py) stop and restart the daemons of the cluster they run against,
# started as scripts/slurm_cluster.sh and scripts/slurm_two_nodes.sh start them (pidfiles under <dir>/run/), and
# leave it as healthy as they found it.

def state_dir(conf: str | None = None):
    """The cluster's folder (<dir>/etc/slurm.conf)."""
    from pathlib import Path

    return Path(conf or os.environ["SLURM_CONF"]).resolve().parent.parent


def _pid(path) -> int | None:
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def stop_daemon(pidfile, sig: int = 15, timeout: float = 30) -> None:
    import signal
    import time

    pid = _pid(pidfile)
    if pid is None:
        return
    os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not _gone(pid):
        os.kill(pid, signal.SIGKILL)


def _answers(argv, conf: str, want: str = "") -> bool:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, env={**os.environ, "SLURM_CONF": conf})
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and want in out.stdout


def wait_until(check, limit_s: float, what: str) -> None:
    import time

    deadline = time.monotonic() + limit_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not back within {limit_s}s")
        time.sleep(0.25)


def nodes_ready(conf: str) -> bool:
    try:
        out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True, timeout=10,
                             env={**os.environ, "SLURM_CONF": conf})
    except (OSError, subprocess.TimeoutExpired):
        return False
    states = out.stdout.split()
    return out.returncode == 0 and bool(states) and all(s in ("idle", "mixed", "allocated") for s in states)


def restart_slurmctld(conf: str) -> float:
    """Stop slurmctld (SIGTERM: it saves its state, as a service restart does) and start it again; returns
    the seconds it was away. Jobs keep running on their nodes meanwhile."""
    import time

    run = state_dir(conf) / "run"
    t0 = time.monotonic()
    stop_daemon(run / "slurmctld.pid")
    subprocess.run(["slurmctld"], check=True, timeout=60, env={**os.environ, "SLURM_CONF": conf})
    wait_until(lambda: _answers(["scontrol", "ping"], conf, "UP"), 60, "slurmctld")
    return time.monotonic() - t0


def stop_slurmdbd(conf: str) -> None:
    """Accounting away: every sacct fails until start_slurmdbd (slurmctld keeps what it must send)."""
    stop_daemon(state_dir(conf) / "run" / "slurmdbd.pid")


def start_slurmdbd(conf: str) -> None:
    if _pid(state_dir(conf) / "run" / "slurmdbd.pid") is None:
        # slurmdbd reads slurmdbd.conf beside $SLURM_CONF
        subprocess.run(["slurmdbd"], check=True, timeout=60, env={**os.environ, "SLURM_CONF": conf})
    wait_until(lambda: _answers(["sacctmgr", "-n", "list", "cluster"], conf), 60, "slurmdbd")


def _node_namespace(conf: str, node: str) -> str:
    """The network namespace of a two-node cluster's node (written by scripts/slurm_two_nodes.sh)."""
    for line in (state_dir(conf) / "etc" / "node_namespaces").read_text().splitlines():
        name, namespace = line.split()
        if name == node:
            return namespace
    raise AssertionError(f"no node {node} in {state_dir(conf)}/etc/node_namespaces")


def kill_slurmd(conf: str, node: str) -> None:
    """The node lost as Slurm sees it: its slurmd killed outright (the job's steps there are left to Slurm)."""
    import signal

    _node_namespace(conf, node)
    stop_daemon(state_dir(conf) / "run" / f"slurmd-{node}.pid", sig=signal.SIGKILL)


def kill_node(conf: str, node: str) -> int:
    """The node dies as a machine does: every process in its network namespace killed at once (its slurmd, the
    job's slurmstepd and ranks), not only slurmd, whose steps would otherwise run on. Returns how many."""
    import signal

    target = os.stat(f"/run/netns/{_node_namespace(conf, node)}").st_ino
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}/ns/net").st_ino == target:
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
        except OSError:
            continue
    return killed


def start_slurmd(conf: str, node: str) -> None:
    """The node's slurmd started again as scripts/slurm_two_nodes.sh starts it; it is back in service
    (ReturnToService=2) once it registers."""
    if _pid(state_dir(conf) / "run" / f"slurmd-{node}.pid") is None:
        subprocess.run(["nsenter", f"--net=/run/netns/{_node_namespace(conf, node)}", "unshare", "--uts", "sh", "-c",
                        f"hostname {node}; exec slurmd -N {node}"], check=True, timeout=60,
                       env={**os.environ, "SLURM_CONF": conf})
    wait_until(lambda: nodes_ready(conf), 60, f"node {node}")
