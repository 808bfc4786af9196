"""The Slurm submission built apart from submitting it: executor parameters and the batch script."""
import sys
from pathlib import Path

import pytest

from mltrain.backends import get
from mltrain.backends.slurm.compute import SlurmComputeConf
from mltrain.errors import ConfigError

from .jobs import frozen_job

GOLDEN = Path(__file__).parent.parent / "data" / "golden" / "sbatch_2x2.sh"


def test_executor_parameters_carry_the_schema_values_and_fail_fast():
    plan = get("slurm").plan(frozen_job("slurm", nodes=2, per_node=2))
    assert plan.details["executor"] == {
        "nodes": 2, "tasks_per_node": 2, "cpus_per_task": 2, "timeout_min": 30, "name": "exp",
        "slurm_signal_delay_s": 90, "slurm_srun_args": ["--kill-on-bad-exit=1"], "slurm_partition": "debug"}


def test_mpi_uses_srun_pmi_and_pyxis_gets_the_image_and_mounts():
    from mltrain.spec.schema import DistributionConf

    job = frozen_job("slurm", distribution=DistributionConf(kind="mpi", process_count_per_node=2, slurm_mpi="pmi2"),
                     environment={"containerized": True, "spec": {"base_image": "nvcr.io/x:1", "setup": ["module load a"]}})
    params = get("slurm").plan(job).details["executor"]
    assert params["slurm_srun_args"][0] == "--kill-on-bad-exit=1" and params["slurm_srun_args"][-1] == "--mpi=pmi2"
    assert "--container-image=nvcr.io/x:1" in params["slurm_srun_args"]
    mounts = next(a for a in params["slurm_srun_args"] if a.startswith("--container-mounts="))
    assert "/runs:/runs" in mounts.split("=", 1)[1].split(",")
    assert params["slurm_setup"] == ["module load a"]


def test_apptainer_wraps_the_rank_program_instead():
    compute = SlurmComputeConf(container_runtime="apptainer", gpus_per_node=1)
    prefix = get("slurm").argv_prefix(compute, {"containerized": True, "spec": {"base_image": "img:1"}}, "/runs/r1")
    assert prefix[:3] == ["apptainer", "exec", "--nv"] and prefix[-1] == "docker://img:1"


def test_submitit_parameters_in_submitit_own_spelling_with_or_without_the_slurm_prefix():
    from mltrain.backends.slurm.submission import submitit_names

    assert submitit_names({"comment": "x", "slurm_mail_user": "a@b", "mem_gb": 4}) == {
        "slurm_comment": "x", "slurm_mail_user": "a@b", "mem_gb": 4}
    with pytest.raises(ConfigError) as err:
        submitit_names({"exclusiv": True})
    assert str(err.value).startswith("compute.submitit.exclusiv: not a submitit parameter; closest: exclusive")


def test_batch_script_matches_the_golden_file():
    backend = get("slurm")
    plan = backend.plan(frozen_job("slurm", nodes=2, per_node=2))
    from mltrain.backends.slurm import task_main

    text = "\n".join(backend.describe(plan)).replace(sys.executable, "<python>").replace(task_main.__file__, "<task_main.py>")
    if not GOLDEN.exists():  # pragma: no cover - written once, then reviewed and committed
        GOLDEN.write_text(text + "\n")
    assert text + "\n" == GOLDEN.read_text()
    assert "--output=/runs/r1/submitit/%j_0_log.out" in text  # the live submission's own folder


def test_an_unknown_submitit_parameter_is_refused_naming_the_valid_ones():
    job = frozen_job("slurm", compute=SlurmComputeConf(submitit={"slurm_bogus": 1}))
    backend = get("slurm")
    with pytest.raises(ConfigError) as err:
        backend.describe(backend.plan(job))
    assert str(err.value).startswith("compute.submitit.slurm_bogus: not a submitit parameter") and "partition" in str(err.value)
