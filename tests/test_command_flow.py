"""The `mltrain` command with Hydra as a library (issue 50): composed once with Hydra's compose API and run by
mltrain's engines in the same process; Hydra's own app only for what it alone reads. What a user sees of it:
Hydra's `--cfg` flags, a sweep folder only where a sweep ran, Hydra's other flags still answered, and a
composition kept for the next command that still sees an edit."""
from __future__ import annotations

from pathlib import Path

import yaml
from support import run_mltrain

COMMAND = ["job=command", "job.command=true"]


def test_cfg_flags_print_what_hydras_print(home, project, tmp_path):
    r = run_mltrain("--cfg", "hydra", cwd=project)
    assert r.rc == 0, r.err
    hydra = yaml.safe_load(r.out)["hydra"]
    assert hydra["runtime"]["choices"]["hydra/launcher"] == "mltrain" and hydra["job"]["name"] == "main"
    assert "help" not in hydra and "hydra_help" not in hydra  # as Hydra's own --cfg hydra leaves them out
    r = run_mltrain("--cfg", "job", "-p", "trainer", "trainer.epochs=4", cwd=project)
    assert r.rc == 0 and r.out.startswith("# @package trainer\n") and yaml.safe_load(r.out)["epochs"] == 4, r.err
    r = run_mltrain("--cfg=job", "--resolve", "--package=run", cwd=project)
    assert r.rc == 0 and yaml.safe_load(r.out)["root"] == f"{home}/runs", r.out + r.err
    r = run_mltrain("--cfg", "job", "-p", "trainer.epochs", cwd=project)
    assert (r.rc, r.out) == (0, "5\n"), r.out + r.err


def test_a_sweep_folder_only_where_a_sweep_ran(home, project):
    r = run_mltrain(*COMMAND, cwd=project)
    assert r.rc == 0, r.err
    assert not (home / "runs" / "_sweeps").exists()  # a lone run is not a sweep
    r = run_mltrain("-m", *COMMAND, "+job.params.i=1,2", "--dry-run", cwd=project)
    assert r.rc == 0 and r.out.count("rank 0") == 2, r.out + r.err
    assert not (home / "runs" / "_sweeps").exists()  # a dry run starts nothing
    r = run_mltrain("-m", *COMMAND, "+job.params.i=1,2", cwd=project)
    assert r.rc == 0, r.err
    (sweep,) = (home / "runs" / "_sweeps").iterdir()
    assert sorted(p.name for p in sweep.iterdir()) == ["multirun.yaml", "summary.json"]
    overrides = yaml.safe_load((sweep / "multirun.yaml").read_text())["hydra"]["overrides"]["task"]
    assert "+job.params.i=1,2" in overrides  # as Hydra's multirun records the command


def test_what_only_hydras_app_reads_still_works(home, project):
    r = run_mltrain("--info", cwd=project)
    assert r.rc == 0 and "Hydra 1.3" in r.out and "mltrain" in r.out, r.out + r.err
    # another sweeper: Hydra's app runs the command, its launcher plugin hands the runs to mltrain's engine
    r = run_mltrain("hydra/sweeper=basic", *COMMAND, "--dry-run", cwd=project)
    assert r.rc == 0 and "rank 0" in r.out, r.out + r.err


def test_a_sampled_value_without_a_hyperdrive_sweep_is_one_line(home, project):
    r = run_mltrain("-m", *COMMAND, "+job.params.x=interval(0,1)", cwd=project)
    assert r.rc == 2 and r.err.count("\n") == 1, r.err
    assert "'+job.params.x=interval(0,1)' is sampled, not listed: only a HyperDrive sweep samples" in r.err


def test_a_kept_composition_still_sees_an_edit(home, project, tmp_path):
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    experiment = project / ".mltrain" / "experiment" / "mine.yaml"
    experiment.parent.mkdir(parents=True)
    experiment.write_text("# @package _global_\ntrainer:\n  epochs: 3\n")
    for epochs in ("3", "3", "4"):
        if epochs == "4":
            experiment.write_text(experiment.read_text().replace("3", "4"))
        r = run_mltrain("--cfg", "job", "-p", "trainer.epochs", "experiment=mine", cwd=project, env=cache)
        assert (r.rc, r.out) == (0, f"{epochs}\n"), r.out + r.err
    kept = list(Path(cache["XDG_CACHE_HOME"]).glob("mltrain/compose/*.pkl"))
    assert len(kept) == 2  # the first command made one, the second used it, the edit made another
