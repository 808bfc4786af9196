"""Bad input: one clear line naming the key and what is allowed, non-zero exit, no traceback,
and nothing created. Plus the CLI paths that launch nothing (help, --cfg, dry run) stay light."""
from __future__ import annotations

import subprocess
import sys

import pytest
from support import leftovers, run_mltrain, runs

SCRIPT = ["job=script", "job.script=show_env.py"]

# (overrides, text the one line must contain)
INVALID = [
    (["trainer.epochs=0"], "trainer.epochs: 0 is invalid; must be > 0"),
    (["trainer.epochs=-2"], "trainer.epochs"),
    (["trainer.batch_size=0"], "trainer.batch_size: 0 is invalid; must be > 0"),
    (["trainer.warmup_epochs=-1"], "trainer.warmup_epochs: -1 is invalid; must be >= 0"),
    (["trainer.learning_rate=0"], "trainer.learning_rate: 0.0 is invalid; must be > 0"),
    (["trainer.patience=0"], "trainer.patience: 0 is invalid; must be > 0"),
    (["trainer.print_frequency=0"], "trainer.print_frequency: 0 is invalid; must be > 0"),
    (["trainer.epochs=abc"], "trainer.epochs: Value 'abc' of type 'str' could not be converted to Integer"),
    (["trainer.learning_rate=fast"], "trainer.learning_rate"),
    (["trainer.foo=1"], "trainer.foo: unknown key (allowed keys: epochs, "),
    (["foo=1"], "foo: unknown key"),
    (["model=resnet9000"], "model=resnet9000 is not a known option (closest: resnet50"),
    (["distribution=horovodx"], "distribution=horovodx is not a known option (allowed: mpi, none, pytorch)"),
    (["distribution=pytorch", "distribution.node_count=0"], "distribution.node_count: 0 is invalid; must be >= 1"),
    (["distribution=pytorch", "distribution.process_count_per_node=0"],
     "distribution.process_count_per_node: 0 is invalid; must be >= 1"),
    (["distribution=pytorch", "distribution.node_count=2", "compute.gpus=1"],
     "compute.gpus: 1 asked per node x 2 nodes; this machine has 0 GPU(s)"),
    (["distribution.process_count_per_node=2"], "distribution=none runs a single process"),
    (["distribution=pytorch", "distribution.backend=mpi"], "distribution.backend: 'mpi' is not supported (allowed: auto, gloo, nccl)"),
    (["distribution=pytorch", "distribution.backend=nccl"], "distribution.backend: nccl needs GPUs and none is visible here"),
    (["job=script"], "job.script: a value is required"),
    (["job=script", "job.script=missing.py"], "job.script: file 'missing.py' does not exist"),
    (["job=script", "job.script=show_env.py", "job.source_directory=/no/such/dir"],
     "job.source_directory: directory '/no/such/dir' does not exist"),
    (SCRIPT + ["job.arguments=--lr"], "job.arguments: Invalid value assigned: str is not a ListConfig"),
    (["job=command"], "job.command: a value is required"),
    (["run.console=some"], "run.console: 'some' is not supported (allowed: rank0, all, none)"),
    (["compute.max_concurrent_jobs=0"], "compute.max_concurrent_jobs: 0 is invalid"),
    (["trainer.epochs=[1"], "cannot parse override"),
    (["+nonsense_key=1"], "nonsense_key: unknown key (allowed: experiment_name, job, environment"),
    (["+trainr.epochs=2"], "trainr.epochs: unknown key; did you mean trainer?"),
]


@pytest.mark.parametrize("overrides,expected", INVALID, ids=[" ".join(o) for o, _ in INVALID])
def test_invalid_input_gives_one_clear_line(home, project, overrides, expected):
    r = run_mltrain(*overrides, cwd=project, timeout=60)
    assert r.rc != 0
    lines = [l for l in r.err.splitlines() if l.strip()]
    assert len(lines) == 1, r.err
    assert lines[0].startswith("mltrain: error: ")
    assert expected in lines[0]
    assert "Traceback" not in r.err + r.out
    assert leftovers(home) == []  # nothing was queued


def test_invalid_member_stops_the_whole_sweep_before_anything_runs(home, project):
    r = run_mltrain("-m", *SCRIPT, "trainer.epochs=1,0", cwd=project)
    assert r.rc != 0 and "trainer.epochs: 0 is invalid" in r.err
    assert leftovers(home) == []


def _modules_after(args: list, cwd) -> tuple:
    """Run the CLI in a fresh interpreter and report whether torch got imported."""
    code = (
        "import sys\n"
        "from mltrain.cli import main\n"
        f"sys.argv = ['mltrain'] + {args!r}\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
        "print('TORCH_LOADED' if 'torch' in sys.modules else 'TORCH_ABSENT', code)\n"
        "print('HEAVY', sorted(m for m in ('optuna', 'matplotlib', 'mlflow', 'onnx', 'onnxruntime', 'sqlalchemy')"
        " if m in sys.modules))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60)
    return p.stdout, p.stderr


@pytest.mark.parametrize("args", [["--help"], ["--cfg", "job"], ["--dry-run"],
                                  ["--dry-run", "distribution=pytorch", "distribution.process_count_per_node=2"],
                                  ["runs", "list"], ["-m", "trainer.learning_rate=0.1,0.2", "--dry-run"],
                                  ["--dry-run", "trainer.export_onnx=true"],
                                  ["--dry-run", "job=convert_to_image_directory", "job.input_path=."],
                                  ["--dry-run", "job=init_image_transformation", "job.resize=true"],
                                  ["--dry-run", "job=split_image_directory", "job.src_path=."],
                                  ["--dry-run", "job=evaluate_model", "job.scored_dataset=."]])
def test_paths_that_launch_nothing_do_not_import_torch(home, project, args):
    out, err = _modules_after(args, project)
    assert "TORCH_ABSENT" in out, out + err
    assert "HEAVY []" in out, "Optuna, matplotlib, MLflow and ONNX are imported only where used: " + out


def test_a_hyperdrive_dry_run_does_not_import_torch(home, project):
    out, err = _modules_after(["-m", "trainer.learning_rate=interval(0.01,0.1)", "sweep.sampling=random",
                               "sweep.max_total_runs=2", "--dry-run"], project)
    assert "TORCH_ABSENT 0" in out, out + err


def test_dry_run_prints_every_rank_and_starts_nothing(home, project):
    r = run_mltrain("--dry-run", "job=script", "job.script=show_env.py", "distribution=pytorch",
                    "distribution.process_count_per_node=2", "job.arguments=[--rank,$RANK]", cwd=project)
    assert r.rc == 0, r.err
    assert "dry run" in r.out
    for rank in (0, 1):
        assert f"rank {rank}:" in r.out
        assert f"AZ_BATCHAI_TASK_INDEX={rank}" in r.out
        assert f"'--rank', '{rank}'" in r.out
    assert "WORLD_SIZE=2" in r.out and "MASTER_ADDR=127.0.0.1" in r.out
    assert "ENV {" not in r.out  # the script never ran
    assert leftovers(home) == []


def test_help_lists_groups_and_options(home, project):
    r = run_mltrain("--help", cwd=project)
    assert r.rc == 0
    assert "distribution:" in r.out and "pytorch" in r.out and "densenet121" in r.out
    assert "_schema" not in r.out


def test_cfg_job_shows_the_designer_defaults(home, project):
    r = run_mltrain("--cfg", "job", cwd=project)
    assert r.rc == 0, r.err
    for line in ("epochs: 5", "batch_size: 16", "warmup_epochs: 0", "learning_rate: 0.001", "seed: 1",
                 "patience: 3", "print_frequency: 10", "kind: train_pytorch_model"):
        assert line in r.out
    assert leftovers(home) == []


def test_user_config_folder_composes_with_builtin_groups(home, project):
    """A repository keeps its own options and experiments in .mltrain/ next to its code."""
    conf = project / ".mltrain"
    (conf / "experiment").mkdir(parents=True)
    (conf / "compute").mkdir()
    (conf / "compute" / "workstation.yaml").write_text(
        "defaults:\n  - local_schema\n  - _self_\nmax_concurrent_jobs: 2\n")
    (conf / "experiment" / "env_check.yaml").write_text(
        "# @package _global_\n"
        "defaults:\n  - override /job: script\n  - override /distribution: pytorch\n  - override /compute: workstation\n"
        "job:\n  script: show_env.py\n  arguments: [--from-experiment]\n"
        "distribution:\n  process_count_per_node: 2\n")
    r = run_mltrain("experiment=env_check", cwd=project)
    assert r.rc == 0, r.err
    run = runs(home)[0]
    assert run["world"]["world_size"] == 2
    assert "--from-experiment" in (project.parent / "home" / "runs" / run["id"] / "logs" / "rank_0.log").read_text()
    cfg = run_mltrain("experiment=env_check", "--cfg", "job", cwd=project)
    assert "max_concurrent_jobs: 2" in cfg.out
    assert "workstation" in run_mltrain("--help", cwd=project).out
