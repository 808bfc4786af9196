"""The frozen job's file format: today's round trip, and job.json files of the 0.1.0 layout."""
import json
from pathlib import Path

from mltrain.jobspec.job import LAYOUT, FrozenJob
from mltrain.jobspec.local_compute import LocalComputeConf
from mltrain.jobspec.schema import DistributionConf
from mltrain.jobspec.slurm_compute import SlurmComputeConf

from .jobs import frozen_job

OLD = Path(__file__).parent.parent / "data" / "old_layout"


def test_round_trip_keeps_typed_settings():
    job = frozen_job("slurm", nodes=2)
    again = FrozenJob.from_json(json.loads(json.dumps(job.to_json())))
    assert again == job and isinstance(again.compute, SlurmComputeConf) and again.world_size == 4


def test_old_local_job_json_is_upgraded():
    job = FrozenJob.from_json(json.loads((OLD / "oldlayout_run" / "job.json").read_text()))
    assert job.backend == "local" and job.process_group == "gloo" and job.layout == LAYOUT
    assert isinstance(job.compute, LocalComputeConf) and job.compute.max_concurrent_jobs == 1
    assert job.distribution == DistributionConf(kind="pytorch", process_count_per_node=2, backend="gloo")


def test_old_slurm_job_json_is_upgraded():
    job = FrozenJob.from_json(json.loads((OLD / "oldlayout_slurm" / "job.json").read_text()))
    assert job.backend == "slurm" and job.compute.poll_s == 0.3 and job.compute.max_requeues == 3


def test_old_submitit_pickle_still_names_a_class_that_exists():
    import pickle

    with open(OLD / "oldlayout_slurm" / "submitit" / "2_submitted.pkl", "rb") as f:
        delayed = pickle.load(f)
    from mltrain.backends.slurm.rank import SlurmRank

    assert isinstance(delayed.function, SlurmRank) and delayed.function.run_dir.endswith("oldlayout_slurm")


def test_compute_settings_with_an_unknown_key_name_the_key_and_the_valid_ones():
    import pytest

    from mltrain.base.errors import ConfigError
    from mltrain.jobspec.computes import compute_from_dict

    with pytest.raises(ConfigError) as err:
        compute_from_dict({"kind": "slurm", "partitoin": "debug"}, key="hydra.launcher.compute")
    assert str(err.value).startswith("hydra.launcher.compute.partitoin: unknown key (allowed: kind, partition,")
    with pytest.raises(ConfigError, match=r"hydra.launcher.compute.kind: 'k8s' is not supported \(allowed: local, slurm\)"):
        compute_from_dict({"kind": "k8s"}, key="hydra.launcher.compute")
