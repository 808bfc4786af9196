"""A sweep larger than the cluster's MaxArraySize, on the real test cluster: MaxArraySize is lowered to 5
for the test (slurm.conf, `scontrol reconfigure`, waiting until the controller shows the new value: the
command returns before it has read it) and put back after it, so a 12-member sweep becomes
arrays of 5, 5 and 2 that keep every member's index, and compute.array_parallelism=3 holds across them.
A sweep whose later array is refused is withdrawn whole."""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
from slurm_support import require_cluster, restart_slurmctld
from support import run_mltrain, runs

pytestmark = pytest.mark.slurm


#: Ends every line a test adds to slurm.conf (a comment there): a line a failed test left is removed by the next.
TAG = "# added by tests/test_slurm_arrays.py"


def _shown(key: str) -> str:
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=30).stdout
    return next(line.split("=", 1)[1].strip() for line in out.splitlines() if line.split("=")[0].strip() == key)


def _until_shown(key: str, want: str) -> None:
    """The controller answers with the value (a reconfigure returns before it has read the file)."""
    deadline = time.monotonic() + 30
    while _shown(key) != want:
        assert time.monotonic() < deadline, f"{key} is {_shown(key)}, not {want}, 30 s after the change"
        time.sleep(0.2)


@contextlib.contextmanager
def _setting(key: str, value: int, default: str, restart: bool):
    """`key=value` in the test cluster's slurm.conf for the test, then the file as it was: read again by
    `scontrol reconfigure`, or by a restart of slurmctld for keys read only at its start."""
    require_cluster()
    conf = Path(os.environ["SLURM_CONF"])
    original = "".join(line for line in conf.read_text().splitlines(keepends=True) if TAG not in line)

    def apply() -> None:
        if restart:
            restart_slurmctld(str(conf))
        else:
            subprocess.run(["scontrol", "reconfigure"], check=True, timeout=60)

    conf.write_text(original + f"{key}={value} {TAG}\n")  # the last value of a key wins
    try:
        apply()
        _until_shown(key, str(value))
        yield
    finally:
        conf.write_text(original)
        apply()
    _until_shown(key, default)


@pytest.fixture
def small_arrays():
    with _setting("MaxArraySize", 5, "1001", restart=False):
        yield


def _span(job_id: str) -> tuple:
    """(start, end) of an array task as accounting records it. mltrain reports a run Completed from its
    ranks' own reports, which can be a moment before slurmdbd has the task's end: asked until it has."""
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "Start,End"], capture_output=True,
                             text=True, timeout=30).stdout.split("\n")[0]
        parts = out.split("|")
        if len(parts) == 2 and all(p[:1].isdigit() for p in parts) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    start, end = parts
    return datetime.fromisoformat(start).timestamp(), datetime.fromisoformat(end).timestamp()


def test_a_sweep_past_max_array_size_is_split_and_keeps_one_parallelism(home, tmp_path, small_arrays):
    r = run_mltrain("-m", "job=command", 'job.command="sleep 1"', "compute=slurm", "compute.poll_s=0.3",
                    "compute.array_parallelism=3", "+job.params.i=range(0,12)", cwd=tmp_path, timeout=240)
    assert r.rc == 0, r.out[-3000:] + r.err
    members = sorted(runs(home), key=lambda run: run["sweep"]["index"])
    assert [m["sweep"]["index"] for m in members] == list(range(12))
    assert all(m["status"] == "Completed" for m in members)
    for m in members:  # member k ran with its own value
        assert f"+job.params.i={m['sweep']['index']}" in m["overrides"]
    arrays: dict = {}  # array job id -> [(task, sweep index)]
    for m in members:
        array, task = m["slurm"]["job_id"].split("_")
        arrays.setdefault(array, []).append((int(task), m["sweep"]["index"]))
    order = sorted(arrays, key=int)
    assert [sorted(arrays[a]) for a in order] == [
        [(t, t) for t in range(5)], [(t, 5 + t) for t in range(5)], [(0, 10), (1, 11)]]
    spans = {a: [_span(f"{a}_{t}") for t, _ in arrays[a]] for a in order}
    for earlier, later in zip(order, order[1:]):  # an array starts once the one before it has ended
        assert min(s for s, _ in spans[later]) >= max(e for _, e in spans[earlier])


def _requested(array_id: str) -> tuple:
    """(ReqCPUS, ReqMem) of an array's task as Slurm's accounting records them (each array here has one),
    asked until accounting has the task's own record (the ranks report the end first; before that sacct
    may answer with the array's placeholder: 0 CPUs)."""
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run(["sacct", "-j", array_id, "-X", "-n", "-P", "-o", "ReqCPUS,ReqMem,State"],
                             capture_output=True, text=True, timeout=30).stdout.split("\n")[0]
        parts = out.split("|")
        if len(parts) == 3 and parts[0].isdigit() and int(parts[0]) > 0 and parts[2].startswith("COMPLETED") \
                or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return int(parts[0]) if parts[0].isdigit() else parts[0], parts[1] if len(parts) > 1 else out


def test_sweep_members_ask_slurm_for_their_own_resources(home, tmp_path):
    """A sweep over compute fields (hydra #2874: per-member resources) is one array per resource set,
    each submitted with its own request, array_parallelism still one limit; members keep their indices."""
    require_cluster()
    r = run_mltrain("-m", "job=command", "job.command=true", "compute=slurm", "compute.poll_s=0.3",
                    "compute.array_parallelism=2", "compute.cpus_per_task=1,2", "compute.mem_gb=1,2", cwd=tmp_path,
                    timeout=240)
    assert r.rc == 0, r.out[-3000:] + r.err
    members = sorted(runs(home), key=lambda run: run["sweep"]["index"])
    assert len(members) == 4 and all(m["status"] == "Completed" for m in members)
    arrays = {m["slurm"]["job_id"].split("_")[0] for m in members}
    assert len(arrays) == 4  # four resource sets: four arrays
    for m in members:
        over = dict(o.split("=", 1) for o in m["overrides"] if o.startswith("compute.") and "=" in o)
        cpus, mem = _requested(m["slurm"]["job_id"].split("_")[0])
        assert (cpus, mem) == (int(over["compute.cpus_per_task"]), f"{over['compute.mem_gb']}G"), m["overrides"]
    order = sorted(arrays, key=int)  # chained afterany, as arrays split past MaxArraySize are
    spans = [_span(a) for a in order]
    for earlier, later in zip(spans, spans[1:]):
        assert later[0] >= earlier[1]


def test_a_sweep_whose_later_array_is_refused_is_withdrawn_whole(home, tmp_path):
    """Two resource sets are two arrays; the controller takes the first and refuses the second (here an
    sbatch that says what slurmctld says past MaxJobCount): the first is cancelled, no member stays
    queued, each ends Failed."""
    fake, calls, ids = tmp_path / "bin", tmp_path / "calls", tmp_path / "ids"
    fake.mkdir()
    (fake / "sbatch").write_text(
        f"#!/bin/sh\necho x >> {calls}\n"
        f"if [ $(wc -l < {calls}) -ge 2 ]; then\n"
        "  echo 'sbatch: error: Batch job submission failed: Resource temporarily unavailable' >&2; exit 1\nfi\n"
        f'out=$({shutil.which("sbatch")} "$@") || exit $?\necho "$out" | tee {ids}\n')
    (fake / "sbatch").chmod(0o755)
    require_cluster()
    r = run_mltrain("-m", "job=command", 'job.command="sleep 60"', "compute=slurm", "compute.cpus_per_task=1,2",
                    "+job.params.i=range(0,4)", cwd=tmp_path, env={"PATH": f"{fake}:{os.environ['PATH']}"}, timeout=120)
    assert r.rc != 0
    members = runs(home)
    assert len(members) == 8
    for m in members:
        assert m["status"] == "Failed"
        assert m["error"] == "submission to Slurm failed: sbatch: error: Batch job submission failed: " \
                             "Resource temporarily unavailable", m["error"]
    first = ids.read_text().split()[-1].split(";")[0]  # the array the controller took
    assert first.isdigit(), ids.read_text()
    deadline = time.monotonic() + 30
    while subprocess.run(["squeue", "-h", "-j", first], capture_output=True, text=True).stdout.strip():
        assert time.monotonic() < deadline, f"array {first} still queued after the sweep failed"
        time.sleep(0.5)



def test_a_sweep_past_max_job_count_is_refused_before_its_members_are_composed(home, tmp_path):
    """10,001 unpacked members on a cluster of Slurm's default MaxJobCount (10,000): one line pointing to
    compute.pack, from the first member's config, in seconds (composing all 10,001 took minutes), and
    nothing created."""
    require_cluster()
    if _shown("MaxJobCount") != "10000":
        pytest.skip("the test cluster's MaxJobCount is not Slurm's default")
    started = time.monotonic()
    r = run_mltrain("-m", "job=command", "job.command=true", "compute=slurm", "+job.params.i=range(0,10001)",
                    "--detach", cwd=tmp_path, timeout=120)
    took = time.monotonic() - started
    assert r.rc != 0
    assert r.err.count("\n") == 1 and "compute.pack" in r.err and "MaxJobCount" in r.err, r.err
    assert took < 30, f"refused after {took:.0f}s"
    assert runs(home) == [] and not (home / "runs").exists() or not any((home / "runs").iterdir())
