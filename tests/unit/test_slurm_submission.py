"""The Slurm submission built apart from submitting it: executor parameters and the batch script."""
import sys
from pathlib import Path

import pytest

from mltrain.backends import get
from mltrain.base.errors import ConfigError
from mltrain.jobspec.slurm_compute import SlurmComputeConf

from .jobs import frozen_job

GOLDEN = Path(__file__).parent.parent / "data" / "golden" / "sbatch_2x2.sh"


def test_executor_parameters_carry_the_schema_values_and_fail_fast():
    plan = get("slurm").plan(frozen_job("slurm", nodes=2, per_node=2))
    assert plan.details["executor"] == {
        "nodes": 2, "tasks_per_node": 2, "cpus_per_task": 2, "timeout_min": 30, "name": "exp",
        "slurm_signal_delay_s": 90, "slurm_srun_args": ["--kill-on-bad-exit=1"], "slurm_partition": "debug"}


def test_mpi_uses_srun_pmi_and_pyxis_gets_the_image_and_mounts():
    from mltrain.jobspec.schema import DistributionConf

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
    prefix, env = get("slurm").wrap_ranks(compute, {"containerized": True, "spec": {"base_image": "img:1"}}, "/runs/r1")
    assert prefix[:3] == ["apptainer", "exec", "--nv"] and prefix[-1] == "docker://img:1"
    assert env == {}


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


def _gpu_cfg(per_node: int = 2, **compute):
    from omegaconf import OmegaConf

    from mltrain.jobspec.schema import DistributionConf

    return OmegaConf.create({"compute": SlurmComputeConf(**compute),
                             "distribution": DistributionConf(kind="pytorch", process_count_per_node=per_node)})


def test_gpus_per_task_and_gpu_bind_reach_sbatch_and_srun():
    backend = get("slurm")
    job = frozen_job("slurm", compute=SlurmComputeConf(gpus_per_task=1, gpu_bind="verbose,single:1"))
    plan = backend.plan(job)
    assert plan.details["executor"]["slurm_gpus_per_task"] == 1
    assert plan.details["executor"]["slurm_srun_args"] == ["--kill-on-bad-exit=1", "--gpu-bind=verbose,single:1"]
    text = "\n".join(backend.describe(plan))  # the dry run's batch script
    assert "#SBATCH --gpus-per-task=1" in text and "--gpu-bind=verbose,single:1" in text
    assert "gpus-per-node" not in text


def test_gpus_per_node_counts_per_task_gpus_so_nccl_is_allowed():
    backend = get("slurm")
    assert backend.check(_gpu_cfg(per_node=2, gpus_per_task=2)) == "nccl"  # auto: 4 GPUs per node
    assert backend.check(_gpu_cfg(per_node=2, gpus_per_node=3)) == "nccl"
    assert backend.check(_gpu_cfg(per_node=2)) == "gloo"
    nccl = _gpu_cfg(per_node=2)
    nccl.distribution.backend = "nccl"
    with pytest.raises(ConfigError, match="nccl needs GPUs and compute.gpus_per_node is 0"):
        backend.check(nccl)


@pytest.mark.parametrize("compute, per_node, expected", [
    ({"gpus_per_task": 1, "gpus_per_node": 4}, 2,
     "compute.gpus_per_task: 1 per task x 2 tasks per node (distribution.process_count_per_node) = 2, but "
     "compute.gpus_per_node=4; set one of the two, or make them agree"),
    ({"gpus_per_task": 1, "gpu_bind": "single"}, 2, "compute.gpu_bind: 'single' is not a Slurm --gpu-bind value (allowed: none, closest, single:N"),
    ({"gpus_per_task": 1, "gpu_bind": "map_gpu:a"}, 2, "compute.gpu_bind: 'map_gpu:a' is not a Slurm --gpu-bind value"),
    ({"gpu_bind": "closest"}, 2, "compute.gpu_bind: binds GPUs, but none are asked for: set compute.gpus_per_task"),
])
def test_gpu_keys_refused_in_one_line(compute, per_node, expected):
    from mltrain.backends.slurm import gpu_binding as gpus
    from mltrain.base.errors import one_line

    with pytest.raises(ConfigError) as err:
        gpus.check(_gpu_cfg(per_node, **compute))
    text = one_line(err.value)
    assert "\n" not in text and text.startswith(expected), text


@pytest.mark.parametrize("bind", ["none", "closest", "verbose,closest", "single:2", "per_task:1", "map_gpu:1,0",
                                  "map_gpu:0*2,1*2", "mask_gpu:0x3,0xC", "mask_gpu:f"])
def test_gpu_bind_values_slurm_takes(bind):
    from mltrain.backends.slurm import gpu_binding as gpus

    gpus.check(_gpu_cfg(2, gpus_per_task=1, gpu_bind=bind))
    gpus.check(_gpu_cfg(2, gpus_per_task=2, gpus_per_node=4))  # agreeing per-task and per-node counts


def test_the_partitions_gpus_from_recorded_sinfo_output():
    from mltrain.backends.slurm.gpu_binding import gres_gpus, parse_partition_gpus

    assert gres_gpus("gpu:4") == 4 and gres_gpus("(null)") == 0 and gres_gpus("gpu:a100:4(S:0-1)") == 4
    assert gres_gpus("gpu:a100:2(S:0,1),gpu:v100:2,mps:400") == 4
    found = parse_partition_gpus("debug*|gpu:4\ncpu|(null)\nbig|gpu:a100:8(S:0-1)\nbig|gpu:a100:4\n")
    assert found == {"debug": ("debug", 4), "cpu": ("cpu", 0), "big": ("big", 8), "": ("debug", 4)}


def test_a_controller_step_asks_for_no_gpus_and_binds_none():
    from omegaconf import OmegaConf

    node = OmegaConf.structured(SlurmComputeConf(gpus_per_node=4, gpus_per_task=2, gpu_bind="closest",
                                                 additional_parameters={"gpu-bind": "none", "gres": "gpu:1"}))
    SlurmComputeConf.for_controller(node)
    assert (node.gpus_per_node, node.gpus_per_task, node.gpu_bind, dict(node.additional_parameters)) == (0, None, None, {})


def test_a_packed_worker_with_slots_asks_for_every_slots_gpus_cpus_and_memory():
    from mltrain.backends.slurm import pack_driver
    from mltrain.backends.slurm.pack_slots import deal, slot_devices

    compute = SlurmComputeConf(pack=2, pack_slots=4, gpus_per_task=2, cpus_per_task=3, mem_gb=2, gpu_bind="closest")
    plan = get("slurm").plan(frozen_job("slurm", per_node=1, compute=compute, sweep_dir="/runs/sweep"))
    params = pack_driver.worker_params(plan)
    assert (params["gpus_per_node"], params["cpus_per_task"], params["mem_gb"]) == (8, 12, 8.0)
    assert "slurm_gpus_per_task" not in params and params["slurm_srun_args"] == ["--kill-on-bad-exit=1"]
    text = "\n".join(get("slurm").describe(plan))  # the dry run deals the worker's GPUs to its slots
    assert "each worker runs 4 members at once" in text and "slot 3: the worker's GPUs 6,7" in text
    assert "#SBATCH --gpus-per-node=8" in text
    assert deal(2, 0) == ["slot 0: no GPU", "slot 1: no GPU"]
    assert slot_devices("4,5,6,7", 4) == ["4", "5", "6", "7"] and slot_devices("0,1,2,3", 2) == ["0,1", "2,3"]
    assert slot_devices(None, 2) == [None, None] and slot_devices("0", 2) == [None, None]


def test_pack_slots_need_pack():
    with pytest.raises(ConfigError) as err:
        get("slurm").validate(frozen_job("slurm", per_node=1, compute=SlurmComputeConf(pack_slots=2)))
    assert str(err.value).startswith("compute.pack_slots: 2 slots are a packed worker's: set compute.pack too")
