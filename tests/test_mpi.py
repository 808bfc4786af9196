"""distribution=mpi on real Open MPI: mpirun locally, srun --mpi=pmix on the real Slurm cluster."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from mpi_support import require_mpi
from support import leftovers, only_run, run_mltrain
from train_support import FAST, data_args, epoch_metrics, write_digits

MPI2 = ["distribution=mpi", "distribution.process_count_per_node=2"]


@pytest.fixture(autouse=True)
def _mpi():
    require_mpi()


def test_mpi4py_allreduce_two_ranks(home, project):
    r = run_mltrain("job=script", "job.script=mpi_allreduce.py", *MPI2, cwd=project)
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    logs = Path(run["dir"]) / "logs"
    for rank in (0, 1):
        assert f"mpi rank={rank} size=2 sum=3 RANK={rank} LOCAL_RANK={rank}" in (logs / f"rank_{rank}.log").read_text()
    assert "mpirun" in run["mpi"]["mpirun"][0] and "-np" in run["mpi"]["mpirun"]  # the mpi backend's part of the record


@pytest.mark.slow
def test_torch_distributed_from_mpi_variables_only(home, project):
    r = run_mltrain("job=script", "job.script=torch_from_mpi_vars.py", *MPI2, cwd=project)
    assert r.rc == 0, r.out + r.err
    assert "torch-over-mpi-vars rank=0 world=2 sum=3" in r.out


@pytest.mark.slow
def test_builtin_trainer_under_mpi(home, project, tmp_path):
    train, val = write_digits(tmp_path / "train", per_class=16), write_digits(tmp_path / "val", per_class=4, offset=100)
    r = run_mltrain(*data_args(train, val), *FAST, "trainer.epochs=1", *MPI2, "distribution.backend=gloo",
                    cwd=project, timeout=300)
    assert r.rc == 0, r.out[-2000:] + r.err
    run = only_run(home)
    assert "2 rank(s)" in r.out and 1 in epoch_metrics(run)
    assert (Path(run["dir"]) / "outputs" / "model" / "weights.pt").is_file()


@pytest.mark.slow
def test_failing_rank_ends_the_mpi_job(home, project):
    r = run_mltrain("job=script", "job.script=fail_rank.py", *MPI2, "+job.params.FAIL_AFTER=1", cwd=project, timeout=120)
    assert r.rc == 1
    run = only_run(home)
    assert run["status"] == "Failed" and run["failed_rank"] == 1
    assert "rank 1 exited with code 3" in run["error"] and "rank 1 failing on purpose" in run["error"]
    launcher_log = (Path(run["dir"]) / "logs" / "launcher.log").read_text()
    assert "mpirun" in launcher_log  # mpirun's own output is the launcher's log (70_mpi_log)


def test_dry_run_prints_the_mpirun_line(home, project):
    r = run_mltrain("--dry-run", "job=script", "job.script=mpi_allreduce.py", *MPI2,
                    "distribution.mpirun_args=[--report-bindings]", cwd=project)
    assert r.rc == 0, r.err
    line = next(l for l in r.out.splitlines() if l.strip().startswith("mpirun:"))
    assert "mpirun -np 2 --bind-to none --map-by slot" in line and "--report-bindings" in line
    assert "-x MASTER_PORT" in line and "mltrain.backends.mpi.rank" in line
    assert "AZ_BATCHAI_TASK_INDEX=1" in r.out and leftovers(home) == []


@pytest.mark.slow
def test_validation_before_launch(home, project):
    too_many = str((os.cpu_count() or 1) + 1)
    r = run_mltrain("job=script", "job.script=mpi_allreduce.py", "distribution=mpi",
                    f"distribution.process_count_per_node={too_many}", cwd=project)
    assert r.rc != 0 and "set distribution.oversubscribe=true" in r.err and len(r.err.strip().splitlines()) == 1
    ok = run_mltrain("--dry-run", "job=script", "job.script=mpi_allreduce.py", "distribution=mpi",
                     f"distribution.process_count_per_node={too_many}", "distribution.oversubscribe=true", cwd=project)
    assert ok.rc == 0 and "--oversubscribe" in ok.out
    bin_dir = str(Path(os.sys.executable).parent)
    r = run_mltrain("job=script", "job.script=mpi_allreduce.py", *MPI2, cwd=project, env={"PATH": bin_dir + ":/usr/bin/nonexistent"})
    assert r.rc != 0 and "apt-get install openmpi-bin" in r.err and len(r.err.strip().splitlines()) == 1


@pytest.mark.slow
def test_mpi_on_slurm_through_srun(home, project):
    from slurm_support import require_cluster, sacct_settles

    require_cluster()
    r = run_mltrain("job=script", "job.script=mpi_allreduce.py", *MPI2, "compute=slurm", "compute.poll_s=0.3",
                    cwd=project, timeout=180)
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    assert sacct_settles(run["slurm"]["job_id"]) == "COMPLETED"
    logs = Path(run["dir"]) / "logs"
    for rank in (0, 1):
        assert f"mpi rank={rank} size=2 sum=3" in (logs / f"rank_{rank}.log").read_text()
    dry = run_mltrain("--dry-run", "job=script", "job.script=mpi_allreduce.py", *MPI2, "compute=slurm", cwd=project)
    assert "--mpi=pmix" in dry.out and "mpirun" not in dry.out.split("sbatch script:")[1]
