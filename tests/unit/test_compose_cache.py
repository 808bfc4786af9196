"""Compositions kept across commands (mltrain.config.compose_cache): a kept one is the composition Hydra makes,
an edit to any config file is seen at once, and nothing resolved while composing is kept."""
import os
import time

from omegaconf import OmegaConf

from mltrain.config.hydra_session import hydra_session
from mltrain.config.memory_nodes import ConfigNode


def _project(tmp_path, monkeypatch, epochs="3"):
    monkeypatch.setenv("MLTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / ".mltrain" / "experiment"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mine.yaml").write_text(f"# @package _global_\ntrainer:\n  epochs: {epochs}\n")
    return folder / "mine.yaml"


def _compose(overrides, keep=True, nodes=()):
    with hydra_session((), nodes, isolate=not keep) as compose:
        cfg = compose(list(overrides))
        return cfg, (compose.cache.hits if compose.cache is not None else None)


def test_a_kept_composition_is_the_one_hydra_makes(tmp_path, monkeypatch):
    _project(tmp_path, monkeypatch)
    overrides = ["experiment=mine", "compute=slurm", "model=resnet50"]
    fresh, hits = _compose(overrides, keep=False)
    assert hits is None  # a process that may run a Hydra app of its own keeps nothing
    first, hits = _compose(overrides)
    assert hits == 0
    kept, hits = _compose(overrides)
    assert hits == 1
    for cfg in (first, kept):
        assert OmegaConf.to_yaml(cfg) == OmegaConf.to_yaml(fresh)
        assert OmegaConf.is_struct(cfg) and cfg.trainer.epochs == 3 and cfg.hydra.runtime.choices.model == "resnet50"


def test_an_edit_is_seen_at_once_even_with_the_same_size_and_time(tmp_path, monkeypatch):
    path = _project(tmp_path, monkeypatch, epochs="3")
    assert _compose(["experiment=mine"])[0].trainer.epochs == 3
    stat = path.stat()
    path.write_text(path.read_text().replace("3", "7"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as a second write within the clock's tick
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    cfg, hits = _compose(["experiment=mine"])
    assert cfg.trainer.epochs == 7 and hits == 0


def test_config_nodes_and_the_current_folder_are_part_of_the_key(tmp_path, monkeypatch):
    _project(tmp_path, monkeypatch)
    node = ConfigNode("mltrain_request", "node", {"trainer": {"epochs": 11}}, "_global_")
    assert _compose(["+mltrain_request=node"], nodes=(node,))[0].trainer.epochs == 11
    other = ConfigNode("mltrain_request", "node", {"trainer": {"epochs": 12}}, "_global_")
    cfg, hits = _compose(["+mltrain_request=node"], nodes=(other,))
    assert cfg.trainer.epochs == 12 and hits == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg, hits = _compose(["compute=slurm"])
    assert hits == 0 and cfg.hydra.runtime.cwd == str(elsewhere)


def test_now_is_each_commands_own(tmp_path, monkeypatch):
    """`${now:...}` resolved while a command ran is not kept: the next command's sweep folder is its own."""
    _project(tmp_path, monkeypatch)
    first, _ = _compose([])
    folder = str(first.hydra.sweep.dir)
    time.sleep(0.01)
    with hydra_session((), (), isolate=False) as compose:
        kept = compose([])
        assert compose.cache.hits == 1
        assert str(kept.hydra.sweep.dir) != folder  # microseconds in the folder's name
        member = compose.loader.load_sweep_config(kept, ["job=command"])
        assert str(member.hydra.sweep.dir) == str(kept.hydra.sweep.dir)  # a run's is its command's, as in Hydra
    with hydra_session((), (), isolate=False) as compose:
        again = compose.loader.load_sweep_config(compose([]), ["job=command"])
        assert compose.cache.hits == 2 and again.job.kind == "command"


def test_it_can_be_turned_off(tmp_path, monkeypatch):
    _project(tmp_path, monkeypatch)
    monkeypatch.setenv("MLTRAIN_COMPOSE_CACHE", "0")
    assert _compose([])[1] is None
    assert not (tmp_path / "cache").exists()


def test_kept_in_the_users_cache_folder_not_in_mltrain_home(tmp_path, monkeypatch):
    _project(tmp_path, monkeypatch)
    _compose([])
    assert len(list((tmp_path / "cache" / "mltrain" / "compose").glob("*.pkl"))) == 1
    assert not (tmp_path / "home").exists()  # a dry run leaves MLTRAIN_HOME as it found it


def test_a_kept_run_composition_is_the_one_hydras_loader_makes(tmp_path, monkeypatch):
    from hydra.core.global_hydra import GlobalHydra

    _project(tmp_path, monkeypatch)
    for _ in range(2):  # made, then kept
        with hydra_session((), (), isolate=False) as compose:
            master = compose(["hydra.job.name=x", "experiment=mine"])
            ours = compose.loader.load_sweep_config(master, ["job=script", "distribution=pytorch"])
            hydras = GlobalHydra.instance().config_loader().load_sweep_config(master, ["job=script", "distribution=pytorch"])
            assert OmegaConf.to_yaml(ours) == OmegaConf.to_yaml(hydras)
            assert ours.hydra.job.name == "x"  # the command's hydra overrides too
    assert compose.cache.hits == 2


def test_a_dangling_link_among_the_config_files_does_not_stop_a_composition(tmp_path, monkeypatch):
    """Found running Azure's examples from a partial copy: a `.mltrain/components/*.yml` link whose target was
    missing made every command of the project end in a FileNotFoundError traceback from the cache's digest."""
    mine = _project(tmp_path, monkeypatch)
    (mine.parent.parent / "components").mkdir()
    (mine.parent.parent / "components" / "gone.yml").symlink_to(tmp_path / "nowhere" / "gone.yml")
    cfg, _ = _compose(["experiment=mine"])
    assert cfg.trainer.epochs == 3
    kept, hits = _compose(["experiment=mine"])
    assert hits == 1 and kept.trainer.epochs == 3
