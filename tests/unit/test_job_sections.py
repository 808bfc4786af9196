"""Job kinds own their sections: only the kinds that read `model`, `data` and `trainer` have them."""
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from mltrain.base.errors import ConfigError
from mltrain.config import schema_store  # noqa: F401  (registers the schemas)
from mltrain.config.paths import builtin_conf_dir
from mltrain.config.sections import open_sections
from mltrain.config.validate import check_known_keys
from mltrain.jobspec.job_schemas import ModelConf, TrainerConf
from mltrain.jobspec.kinds import JOB_KINDS, SECTIONS


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(builtin_conf_dir()), version_base="1.3"):
        return compose("mltrain", overrides=open_sections(list(overrides)))


def _sections(cfg) -> list:
    return [name for name in SECTIONS if name in cfg]


@pytest.mark.parametrize("kind", sorted(JOB_KINDS))
def test_each_kind_has_exactly_the_sections_it_names(kind):
    assert _sections(_compose(f"job={kind}")) == [s for s in SECTIONS if s in JOB_KINDS[kind].sections]


def test_the_training_sections_are_typed_by_their_presets():
    cfg = _compose("model=densenet121", "trainer.epochs=3")
    assert OmegaConf.get_type(cfg.model) is ModelConf and OmegaConf.get_type(cfg.trainer) is TrainerConf
    assert cfg.model.name == "densenet121" and cfg.trainer.epochs == 3 and cfg.data.image_size == 32


def test_a_value_for_a_section_the_kind_lacks_gives_it_that_section():
    assert open_sections(["job=script", "trainer.epochs=1", "job.script=a.py", "+trainer.seed=2"]) == \
        ["job=script", "++trainer.epochs=1", "job.script=a.py", "+trainer.seed=2"]
    assert open_sections(["trainer.epochs=1"]) == ["trainer.epochs=1"]  # the primary kind has every section
    assert open_sections(["job=score_image_model", "data.image_size=8", "model.name=x"]) == \
        ["job=score_image_model", "data.image_size=8", "++model.name=x"]
    cfg = _compose("job=command", "job.command=true", "trainer.epochs=1")
    assert _sections(cfg) == ["trainer"] and cfg.trainer.epochs == 1


def test_a_group_choice_gives_any_kind_that_section_typed():
    cfg = _compose("job=command", "job.command=true", "model=resnet50")
    assert _sections(cfg) == ["model"] and OmegaConf.get_type(cfg.model) is ModelConf


def test_values_of_an_added_section_are_checked_by_the_validator():
    cfg = OmegaConf.create({"job": {"kind": "script"}, "trainer": {"epochs": "abc"}})
    with pytest.raises(ConfigError, match="^trainer.epochs: Value 'abc' of type 'str' could not be converted"):
        check_known_keys(cfg)
    with pytest.raises(ConfigError, match="^trainer.epoch: unknown key"):
        check_known_keys(OmegaConf.create({"trainer": {"epoch": 1}}))


def test_a_top_level_key_no_schema_declares_is_refused():
    with pytest.raises(ConfigError, match="^trainr: unknown key; did you mean trainer"):
        check_known_keys(OmegaConf.create({"trainr": {"epochs": 1}}))


def test_cfg_job_of_a_command_shows_no_training_section(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mltrain", "job=command", "job.command=true", "--cfg", "job"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    tops = [line.split(":")[0] for line in out.stdout.splitlines() if line and not line.startswith(" ")]
    assert "job" in tops and not set(SECTIONS) & set(tops)
