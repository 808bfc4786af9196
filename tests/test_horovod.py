"""Horovod for real: seed 002's script shape unmodified under real mpirun and on the test Slurm cluster
through srun --mpi=pmix, the built-in trainer on Horovod, fail-fast, and the build's cache."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from horovod_support import require_horovod
from support import only_run, run_mltrain
from train_support import FAST, data_args, epoch_metrics, write_digits

pytestmark = pytest.mark.slow
HVD2 = ["job=script", "distribution=mpi", "distribution.process_count_per_node=2", "distribution.horovod=true"]


@pytest.fixture(autouse=True)
def _horovod():
    require_horovod()


def _digests(run: dict) -> dict:
    out = {}
    for rank in (0, 1):
        text = (Path(run["dir"]) / "logs" / f"rank_{rank}.log").read_text()
        m = re.search(rf"rank {rank} of 2 start (\w+) params (\w+)", text)
        assert m, text[-2000:]
        out[rank] = m.groups()
    return out


def test_seed_002_script_runs_unmodified_and_ranks_agree(home, project):
    r = run_mltrain(*HVD2, "job.script=hvd_mnist.py", "job.arguments=[--epochs,2]", cwd=project, timeout=240)
    assert r.rc == 0, r.out[-3000:] + r.err
    (start0, end0), (start1, end1) = _digests(only_run(home)).values()
    assert end0 == end1, "both ranks must end with identical parameters"
    assert start0 == start1, "broadcast_parameters gave every rank rank 0's weights"
    assert end0 != start0, "training changed the weights"


def test_seed_002_script_on_slurm_through_srun_pmix(home, project):
    from slurm_support import require_cluster, sacct_settles

    require_cluster()
    r = run_mltrain(*HVD2, "job.script=hvd_mnist.py", "job.arguments=[--epochs,1]", "compute=slurm",
                    "compute.poll_s=0.3", cwd=project, timeout=300)
    assert r.rc == 0, r.out[-3000:] + r.err
    run = only_run(home)
    (_, end0), (_, end1) = _digests(run).values()
    assert end0 == end1
    assert sacct_settles(run["slurm"]["job_id"]) == "COMPLETED"


def test_a_failing_rank_under_horovod_ends_the_run_fast(home, project):
    # A rank 0 left waiting in a collective would hang until the subprocess deadline fails the test.
    r = run_mltrain(*HVD2, "job.script=hvd_mnist.py", "job.arguments=[--fail-rank,1]", cwd=project, timeout=240)
    assert r.rc == 1, r.out + r.err
    run = only_run(home)
    assert run["status"] == "Failed" and run["failed_rank"] == 1
    assert "rank 1 exited with code 3" in run["error"] and "failing on purpose" in run["error"]


def test_builtin_trainer_on_horovod_matches_ddp(home, project, tmp_path):
    train = write_digits(tmp_path / "train", per_class=24)
    val = write_digits(tmp_path / "val", per_class=6, offset=100)
    common = [*data_args(train, val), *FAST, "trainer.epochs=3", "trainer.patience=10", "distribution=mpi",
              "distribution.process_count_per_node=2", "distribution.backend=gloo"]
    results = {}
    for name, extra in (("ddp", []), ("horovod", ["distribution.horovod=true"])):
        r = run_mltrain(*common, *extra, f"run.id={name}", cwd=project, timeout=400)
        assert r.rc == 0, r.out[-3000:] + r.err
        run = json.loads((home / "runs" / name / "run.json").read_text()) | {"dir": str(home / "runs" / name)}
        results[name] = epoch_metrics(run)
        log = (Path(run["dir"]) / "logs" / "rank_0.log").read_text()
        assert ("gradients through Horovod" in log) == (name == "horovod")
        assert (Path(run["dir"]) / "outputs" / "model" / "weights.pt").is_file()
        assert (Path(run["dir"]) / "checkpoints" / "epoch_3.pt").is_file()
    # Same seeded weights, same batches, gradients averaged alike: the same training, up to the order of
    # floating-point sums (Horovod's zero-gradient step to fill an empty optimizer state once made it
    # differ from the first iteration). Accuracy on 18 images is too coarse to compare: one image is 0.056.
    for epoch in (1, 2, 3):
        ddp, hvd = results["ddp"][epoch]["train_loss"], results["horovod"][epoch]["train_loss"]
        assert abs(hvd - ddp) <= 1e-3 * ddp, (epoch, results)
    # Whether 3 epochs on 72 images beat chance depends on the CPU's floating-point paths, so only what is
    # deterministic is asserted: both trained alike and evaluated every epoch with a valid accuracy.
    for name in ("ddp", "horovod"):
        assert all(0.0 <= results[name][e]["top1_accuracy"] <= 1.0 for e in (1, 2, 3)), results


def test_ranks_whose_interpreter_lacks_horovod_are_refused_in_one_line(home, project):
    import os
    import sys

    bare = os.path.join(sys.base_prefix, "bin", "python3")  # this venv's base interpreter: no Horovod there
    r = run_mltrain(*HVD2, "job.script=hvd_mnist.py", f"environment.python.interpreter={bare}", cwd=project)
    assert r.rc == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert "distribution.horovod: Horovod is not installed" in r.err and "`mltrain horovod build`" in r.err
    assert not (home / "runs").exists() or not any((home / "runs").glob("*/run.json"))


def test_horovod_needs_the_mpi_distribution(home, project):
    r = run_mltrain("job=script", "job.script=hvd_mnist.py", "distribution=pytorch", "distribution.horovod=true",
                    cwd=project)
    assert r.rc == 2 and r.err.strip().splitlines() == [
        "mltrain: error: distribution.horovod: true needs distribution=mpi (Horovod runs over MPI, as Azure ML's "
        "MpiConfiguration)"]
    assert not (home / "runs").exists() or not any((home / "runs").glob("*/run.json"))


def test_the_build_is_cached_and_the_installed_horovod_checks_out():
    """The test command built (or reused) the wheel under the default MLTRAIN_HOME; asking again must
    find it in the cache instead of compiling for minutes."""
    import subprocess

    from support import mltrain_exe

    out = subprocess.run(mltrain_exe() + ["horovod", "build", "--no-install"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "cached" in out.stdout and "building Horovod" not in out.stdout, out.stdout
    check = subprocess.run(mltrain_exe() + ["horovod", "check"], capture_output=True, text=True, timeout=120)
    info = json.loads(check.stdout)
    assert info["mpi"] is True and info["horovod"] == "0.28.1"
