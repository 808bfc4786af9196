"""Composition, validation and freezing, in-process through Hydra's compose API: the frozen job a
config becomes, and that freezing creates nothing (no run folder, no MLflow template)."""
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from mpi_support import require_mpi

from mltrain.base.errors import ConfigError
from mltrain.config import schema_store  # noqa: F401  (registers the schemas)
from mltrain.config.paths import builtin_conf_dir
from mltrain.jobspec.local_compute import LocalComputeConf
from mltrain.jobspec.slurm_compute import SlurmComputeConf
from mltrain.launch.freeze import freeze
from mltrain.runs import mlflow_run


def _frozen(tmp_path, overrides):
    with initialize_config_dir(config_dir=str(builtin_conf_dir()), version_base="1.3"):
        cfg = compose("mltrain", overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    return freeze(cfg, str(tmp_path / "runs"))


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("MLTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("MLTRAIN_TRACKING", "on")
    mlflow_run.template_dir.cache_clear()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("print('hi')\n")
    yield tmp_path
    mlflow_run.template_dir.cache_clear()


def test_a_command_job_freezes_to_its_rank_program_and_creates_nothing(env):
    job = _frozen(env, ["job=command", "job.command=echo hi", f"job.source_directory={env / 'src'}", "run.id=r1"])
    assert job.backend == "local" and isinstance(job.compute, LocalComputeConf) and job.world_size == 1
    assert job.argv == ["/bin/sh", "-c", "echo hi"] and job.cwd.endswith("r1/snapshot")
    if mlflow_run.enabled():  # the ranks' MLflow run is named without building anything
        assert job.env["MLFLOW_RUN_ID"] == mlflow_run.RUN_ID and job.env["MLFLOW_TRACKING_URI"].endswith("r1/mlflow.db")
    assert not (env / "runs").exists() and not (env / "cache").exists()


def test_a_script_on_slurm_with_two_ranks_per_node(env):
    job = _frozen(env, ["job=script", f"job.source_directory={env / 'src'}", "job.script=train.py", "compute=slurm",
                        "distribution=pytorch", "distribution.process_count_per_node=2", "run.id=r2"])
    assert job.backend == "slurm" and isinstance(job.compute, SlurmComputeConf)
    assert job.world_size == 2 and job.process_group == "gloo" and job.argv[-1].endswith("snapshot/train.py")


@pytest.mark.mpi  # tests/conftest.py marks only the tests outside tests/unit from the helpers they call
def test_mpi_on_this_machine_chooses_the_mpi_backend(env):
    require_mpi()  # the mpi backend refuses a config where mpirun is not on PATH: skipped there, failed under CI
    job = _frozen(env, ["job=script", f"job.source_directory={env / 'src'}", "job.script=train.py",
                        "distribution=mpi", "run.id=r3"])
    assert job.backend == "mpi"


@pytest.mark.parametrize("overrides, key", [
    (["job=script", "job.script=nope.py"], "job.script"),
    (["trainer.epochs=0"], "trainer.epochs"),
    (["job=command", "job.command="], "job.command"),
])
def test_invalid_configs_are_refused_naming_the_key(env, overrides, key):
    source = [f"job.source_directory={env / 'src'}"] if overrides[0].startswith("job=") else []
    with pytest.raises(ConfigError) as err:
        _frozen(env, [*overrides, *source, "run.id=bad"])
    assert err.value.key == key and not (env / "runs").exists()


def test_run_ids_given_in_one_second_never_repeat():
    """By chance, 3 random bytes would repeat about 12 times among 20,000 ids of one second: a 1,000-member sweep
    frozen in 3 s once drew the same id twice (issue 66), and was refused as 'a run already exists'."""
    from mltrain.jobspec.job import new_run_id

    ids = [new_run_id("exp") for _ in range(20000)]
    assert len(set(ids)) == len(ids)
