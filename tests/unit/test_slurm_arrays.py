"""Sweeps past the cluster's MaxArraySize: the limit read from recorded `scontrol show config` output,
the members dealt into arrays in order, and array_parallelism kept one limit across them."""
from pathlib import Path

import pytest

from mltrain.backends.base import Plan
from mltrain.backends.slurm.accounting import (
    DEFAULT_MAX_ARRAY_SIZE,
    DEFAULT_MAX_JOB_COUNT,
    ClusterLimits,
    parse_limits,
    parse_max_array_size,
)
from mltrain.backends.slurm.driver import after_array, array_chunks, check_job_count, resource_groups
from mltrain.base.errors import ConfigError

RECORDED = Path(__file__).parent.parent / "data" / "slurm" / "scontrol_show_config_22.05.txt"


def test_max_array_size_is_read_from_scontrol_show_config():
    text = RECORDED.read_text()
    assert parse_max_array_size(text) == 1001 == DEFAULT_MAX_ARRAY_SIZE
    small = text.replace("MaxArraySize            = 1001", "MaxArraySize            = 101")
    assert parse_max_array_size(small) == 101
    # MaxJobCount and MaxArraySize share a prefix of words, not a key
    assert parse_max_array_size("MaxJobCount             = 10000\n") is None
    assert parse_max_array_size("") is None


def test_max_job_count_is_read_beside_it_and_slurms_defaults_stand_in_for_a_silent_controller():
    text = RECORDED.read_text()
    assert parse_limits(text) == ClusterLimits(1001, 10000) == ClusterLimits()
    assert DEFAULT_MAX_JOB_COUNT == 10000
    lowered = text.replace("MaxJobCount             = 10000", "MaxJobCount             = 250")
    assert parse_limits(lowered) == ClusterLimits(1001, 250)
    assert parse_limits("") == ClusterLimits(DEFAULT_MAX_ARRAY_SIZE, DEFAULT_MAX_JOB_COUNT)
    assert parse_limits("MaxJobCount = 0\n").max_job_count == DEFAULT_MAX_JOB_COUNT  # never a limit of none


def test_members_are_dealt_into_arrays_in_order_and_keep_their_positions():
    chunks = array_chunks(250, 101)
    assert [len(c) for c in chunks] == [101, 101, 48]
    assert [i for c in chunks for i in c] == list(range(250))  # member k is still member k
    assert array_chunks(100, 1001) == [range(0, 100)]
    assert array_chunks(1001, 1001) == [range(0, 1001)]
    assert [len(c) for c in array_chunks(1002, 1001)] == [1001, 1]
    assert array_chunks(3, 0) == [range(0, 1), range(1, 2), range(2, 3)]  # never an empty array


def test_a_later_array_waits_for_the_one_before_it_keeping_other_dependencies():
    params = {"nodes": 1, "slurm_array_parallelism": 8}
    later = after_array(params, "41")
    assert later["slurm_additional_parameters"] == {"dependency": "afterany:41"}
    assert params == {"nodes": 1, "slurm_array_parallelism": 8}  # the first array's parameters are untouched
    step = {"slurm_additional_parameters": {"dependency": "afterok:7:8", "kill_on_invalid_dep": "yes"}}
    assert after_array(step, "42")["slurm_additional_parameters"] == {
        "dependency": "afterok:7:8,afterany:42", "kill_on_invalid_dep": "yes"}
    assert step["slurm_additional_parameters"]["dependency"] == "afterok:7:8"


def test_members_asking_for_different_resources_go_in_arrays_of_their_own():
    asks = [{"cpus_per_task": 1, "mem_gb": 1}, {"cpus_per_task": 2, "mem_gb": 1}, {"mem_gb": 1, "cpus_per_task": 1},
            {"cpus_per_task": 2, "mem_gb": 1, "slurm_partition": "gpu"}, {"cpus_per_task": 2, "mem_gb": 1}]
    plans = [Plan(job=None, ranks=[], details={"executor": a}) for a in asks]  # type: ignore[arg-type]
    assert resource_groups(plans) == [[0, 2], [1, 4], [3]]  # first-seen order; key order does not matter
    assert resource_groups(plans[:1]) == [[0]]


def test_a_sweep_with_as_many_members_as_max_job_count_is_refused_pointing_to_packing():
    limit = parse_limits(RECORDED.read_text()).max_job_count
    check_job_count(limit - 1, limit)  # fits (Slurm refuses only at the limit)
    check_job_count(1, 1)  # a lone run is never a sweep Slurm could not hold
    with pytest.raises(ConfigError) as refused:
        check_job_count(limit, limit)
    assert str(refused.value) == (
        "compute.pack: 10000 members would be 10000 Slurm jobs, and this cluster holds fewer than 10000 at once "
        "(MaxJobCount, `scontrol show config`): run them in a few worker jobs with compute.pack=N "
        "(hydra.launcher.pack=N for a plain Hydra app)")
