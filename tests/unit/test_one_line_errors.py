"""Every configuration error a user can cause is rendered as one line naming the key."""
import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException, MissingConfigException

from mltrain.base.errors import ConfigError, one_line
from mltrain.config import schema_store  # noqa: F401  (registers the schemas)
from mltrain.config.paths import builtin_conf_dir


def _compose(overrides):
    with initialize_config_dir(config_dir=str(builtin_conf_dir()), version_base="1.3"):
        return compose("mltrain", overrides=overrides)


@pytest.mark.parametrize("overrides, expected", [
    (["trainer.epochs=abc"], "trainer.epochs: Value 'abc' of type 'str' could not be converted to Integer"),
    (["trainer.epoch=3"], "trainer.epoch: unknown key (allowed keys: epochs, batch_size"),
    (["model=resnet19"], "model=resnet19 is not a known option (closest: resnet18"),
])
def test_composition_errors(overrides, expected):
    with pytest.raises((ConfigCompositionException, MissingConfigException)) as err:
        _compose(overrides)
    text = one_line(err.value)
    assert "\n" not in text and text.startswith(expected), text


def test_config_error_names_key_problem_and_allowed():
    text = one_line(ConfigError("run.console", "'some' is not supported", ["rank0", "all", "none"]))
    assert text == "run.console: 'some' is not supported (allowed: rank0, all, none)"


def test_composition_of_the_presets_is_typed():
    cfg = _compose(["compute=slurm", "distribution=mpi"])
    assert cfg.compute.kind == "slurm" and cfg.compute.max_requeues == 3 and cfg.distribution.slurm_mpi == "pmix"
    assert cfg.trainer.learning_rate == 0.001 and cfg.job.kind == "train_pytorch_model"


def test_unknown_top_level_key_added_with_plus_is_refused_with_the_closest():
    from mltrain.config.validate import check_added_keys

    with pytest.raises(ConfigError) as err:
        check_added_keys(["+trainr.epochs=2"])
    assert "trainr.epochs: unknown key; did you mean trainer?" in str(err.value)
    check_added_keys(["+job.params.x=1", "++hydra.job.chdir=false", "+experiment=x"], groups=["experiment"])
