"""Which sweeps mltrain.launch.deferred leaves to their workers to make: members that differ only in the
values of keys that cannot change their Slurm request, environment, ranks or folders."""
from mltrain.launch.deferred import blocked, swept_keys

FIXED = ["job=command", "job.command=true", "compute=slurm", "compute.pack=8", "run.detach=True"]


def test_the_swept_keys_are_those_whose_values_differ_between_members():
    members = [FIXED + [f"+job.params.i={i}", f"trainer.learning_rate={lr}"] for i in range(3) for lr in (0.1, 0.01)]
    assert swept_keys(members) == {"job.params.i", "trainer.learning_rate"}


def test_members_that_set_different_keys_or_delete_one_are_not_a_sweep_over_values():
    assert swept_keys([FIXED + ["a=1"], FIXED + ["b=1"]]) is None
    assert swept_keys([FIXED + ["a=1"], FIXED]) is None
    assert swept_keys([FIXED + ["~a=1"], FIXED + ["~a=2"]]) is None


def test_keys_that_change_what_the_driver_made_for_all_members_are_blocked():
    for key in ("compute.cpus_per_task", "compute", "distribution.process_count_per_node", "environment.image",
                "run.root", "experiment_name", "job.source_directory", "hydra.job.chdir"):
        assert blocked(key), key
    for key in ("job.params.i", "trainer.learning_rate", "job.command", "model.name", "computer_vision"):
        assert not blocked(key), key
