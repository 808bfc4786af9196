"""Bad input, as a new user would give it: a non-zero exit, no traceback, one line naming the key or
file, no hang, and nothing left behind: no run or sweep folder for a refused command, no run left
in a non-final status once its folder exists."""
from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess

import hydra
import pytest
from support import mltrain_exe, only_run, run_mltrain, runs

REFUSED = [
    (["experiment=nosuch"], "experiment: 'nosuch' is not a known experiment"),
    (["experiment=ddp_smok"], "experiment: 'ddp_smok' is not a known experiment (closest: ddp_smoke)"),
    (["+nonsense_key=1"], "nonsense_key: unknown key"),
    (["trainer.epochs=0"], "trainer.epochs: 0 is invalid; must be > 0"),
    (["trainer.keep_checkpoints=-1"], "trainer.keep_checkpoints: -1 is invalid; must be >= 0"),
    (["data=image_directory"], "data.train_dir: a value is required (set data.train_dir=...)"),
    (["-m", "trainer.epochs=1,0"], "trainer.epochs: 0 is invalid"),
    (["distribution=pytorch", "distribution.horovod=true"], "distribution.horovod: true needs distribution=mpi"),
    (["job=script", "job.script=show_env.py", "+job.params.lr-rate=1"],
     "job.params.lr-rate: not a valid variable name (letters, digits and _; e.g. lr_rate)"),
    (["compute=slurm", "job=command", "job.command=true", "compute.submitit.commnt=x"],
     "compute.submitit.commnt: not a submitit parameter; closest: comment (allowed: account,"),
    (["=3"], "cannot parse override '=3': the key before '=' is missing"),
    (["trainer=typo"], "trainer.epoch: unknown key in trainer/typo (allowed keys: epochs, batch_size,"),
    (["trainer=broken"], "{project}/.mltrain/trainer/broken.yaml: invalid YAML at line 5, column 1: expected ',' or ']'"),
    (["job=command", "job.command=true", "run.root=/proc/nosuch/runs"],
     "run.root: cannot create /proc/nosuch/runs (/proc/nosuch: No such file or directory)"),
    (["job=command", "job.command=true", "run.root=/proc/nosuch/runs", "--dry-run"],
     "run.root: cannot create /proc/nosuch/runs (/proc/nosuch: No such file or directory)"),
    (["-m", "pipeline=a,b"], "pipeline: -m does not sweep pipelines (a pipeline is itself many runs): run each one as "
                             "its own command (mltrain pipeline=a; mltrain pipeline=b)"),
    (["trainer.export_onnx=true", "trainer.onnx_opset=3"],
     "trainer.onnx_opset: 3 is outside what torch's ONNX exporter writes: 18 to 23"),
    # Hydra's flags given wrong: the usage error a plain Hydra app gives, in one line. A flag missing its value
    # ran the job instead (a quick one here, so that a regression fails at once instead of training for minutes)
    (["job=command", "job.command=true", "--cfg"], "argument --cfg/-c: expected one argument"),
    (["job=command", "job.command=true", "-c"], "argument --cfg/-c: expected one argument"),
    (["--cfg", "job", "-p"], "argument --package/-p: expected one argument"),
    (["--cfg", "jobs"], "argument --cfg/-c: invalid choice: 'jobs' (choose from 'job', 'hydra', 'all')"),
    (["--shell-completion"], "--shell-completion needs one of install=SHELL, uninstall=SHELL or query=SHELL"),
    (["--resolve"], "--resolve can only be used with --cfg or --help"),
]


def _nothing_written(home) -> bool:
    return not (home / "runs").exists()


@pytest.mark.parametrize("args, expected", REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_refused_before_anything_is_written(home, project, args, expected):
    presets = project / ".mltrain" / "trainer"  # the user's own presets: one misspelt key, one broken YAML
    presets.mkdir(parents=True)
    (presets / "typo.yaml").write_text("defaults:\n  - trainer_schema\n  - _self_\nepoch: 3\n")
    (presets / "broken.yaml").write_text("defaults:\n  - trainer_schema\n  - _self_\nepochs: [1, 2\n")
    r = run_mltrain(*args, cwd=project, timeout=60)
    assert r.rc == 2, r.out + r.err
    assert "Traceback" not in r.out + r.err
    lines = r.err.strip().splitlines()
    expected = expected.replace("{project}", str(project))
    assert len(lines) == 1 and lines[0].startswith(f"mltrain: error: {expected}"), r.err
    assert _nothing_written(home), "a refused command left a folder behind"


def test_version_names_mltrain_and_hydra_beside_it(home, project):
    r = run_mltrain("--version", cwd=project, timeout=60)
    assert r.rc == 0 and r.err == "", r.err
    assert r.out.splitlines() == [f"mltrain {importlib.metadata.version('mltrain')} (Hydra {hydra.__version__})"]
    assert _nothing_written(home)


def test_a_dry_run_writes_nothing(home, project):
    r = run_mltrain("--dry-run", "-m", "job=command", "job.command=true", "+job.params.x=1,2", cwd=project)
    assert r.rc == 0 and "dry run" in r.out
    assert _nothing_written(home)


def test_a_reused_run_id_is_refused_and_the_first_run_kept(home, project):
    assert run_mltrain("job=command", "job.command=true", "run.id=mine", cwd=project).rc == 0
    r = run_mltrain("job=command", "job.command=false", "run.id=mine", cwd=project)
    assert r.rc == 2 and r.err.strip().splitlines() == [
        f"mltrain: error: run.id: a run already exists at {home / 'runs' / 'mine'}; run directories are never reused"]
    assert only_run(home)["status"] == "Completed"


def test_an_invalid_ignore_pattern_fails_the_run_with_the_file_named(home, project):
    (project / ".amlignore").write_text("data\\raw\\\n")  # a Windows path, as users write them
    r = run_mltrain("job=script", "job.script=show_env.py", cwd=project)
    assert r.rc != 0 and "Traceback" not in r.out + r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and f"{project / '.amlignore'}: Invalid git pattern" in lines[0], r.err
    run = only_run(home)
    assert run["status"] == "Failed" and ".amlignore" in run["error"]


def test_a_sweep_whose_member_cannot_be_created_leaves_no_member_waiting(home, project):
    (project / "runs").mkdir()
    (project / "runs" / "taken_1").mkdir()  # member 1's directory exists already
    r = run_mltrain("-m", "job=command", "job.command=true", f"run.root={project}/runs", "run.id=taken",
                    "+job.params.x=1,2", cwd=project)
    assert r.rc == 2 and "run.id: a run already exists" in r.err and len(r.err.strip().splitlines()) == 1
    assert not (project / "runs" / "taken").exists() and not any((project / "runs").glob("*/run.json"))


def test_sbatch_failing_ends_the_run_failed(home, project, tmp_path):
    if not shutil.which("sbatch"):
        from slurm_support import require_cluster

        require_cluster()
    empty = tmp_path / "slurm.conf"
    empty.write_text("")
    r = run_mltrain("job=command", "job.command=true", "compute=slurm", cwd=project, env={"SLURM_CONF": str(empty)})
    assert r.rc == 1 and "Traceback" not in r.out + r.err
    run = only_run(home)
    assert run["status"] == "Failed" and run["error"].startswith("submission to Slurm failed: sbatch")


def test_without_slurm_a_slurm_run_is_refused_and_its_dry_run_still_shown(home, project, tmp_path):
    no_tools = {"PATH": str(tmp_path / "empty-bin")}  # a laptop: no srun, no sbatch
    r = run_mltrain("job=command", "job.command=true", "compute=slurm", cwd=project, env=no_tools)
    assert r.rc == 2 and r.err.strip().splitlines() == [
        "mltrain: error: compute=slurm: no Slurm here: srun and sbatch are not on PATH (run on a Slurm login node, "
        "or use --dry-run to see the batch script)"]
    assert _nothing_written(home)
    r = run_mltrain("job=command", "job.command=true", "compute=slurm", "distribution=pytorch", "distribution.node_count=2", "--dry-run", cwd=project,
                    env=no_tools)
    assert r.rc == 0 and "#SBATCH --nodes=2" in r.out, r.err
    assert _nothing_written(home)


def test_a_truncated_run_record_is_reported_not_a_traceback(home, project):
    assert run_mltrain("job=command", "job.command=true", cwd=project).rc == 0
    run = only_run(home)
    path = home / "runs" / run["id"] / "run.json"
    path.write_text(path.read_text()[:40])
    for command in ("show", "status"):
        r = run_mltrain("runs", command, run["id"], cwd=project)
        assert r.rc != 0 and "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1
        assert "run.json is unreadable" in r.err
    listed = run_mltrain("runs", "list", cwd=project)
    assert listed.rc == 0 and f"{run['id']}" in listed.out and "unreadable" in listed.out


def test_runs_list_into_head_ends_quietly(home, project):
    assert run_mltrain("job=command", "job.command=true", cwd=project).rc == 0
    template = runs(home)[0]
    record = json.loads((home / "runs" / template["id"] / "run.json").read_text())
    for i in range(1500):  # more output than a pipe holds, so the writer sees the reader go
        folder = home / "runs" / f"copy_{i:04d}"
        folder.mkdir()
        (folder / "run.json").write_text(json.dumps({**record, "id": folder.name}))
    out = subprocess.run(" ".join(mltrain_exe()) + " runs list --limit 2000 | head -1", shell=True,
                         capture_output=True, text=True, cwd=project, env={**os.environ}, timeout=120)
    assert out.stdout.startswith("RUN") and "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr


def test_a_directory_named_as_the_script_is_called_a_directory(home, project):
    (project / "pkg").mkdir()
    r = run_mltrain("job=script", "job.script=pkg", cwd=project)
    assert r.rc == 2 and r.err.strip().splitlines() == [
        f"mltrain: error: job.script: 'pkg' in '{project}' is a directory; name the script file in it"]
    assert _nothing_written(home)


@pytest.mark.slow
def test_a_diverged_validation_loss_fails_the_run_instead_of_completing(home, project, tmp_path):
    """Weights whose BatchNorm running variance is NaN: training (batch statistics) stays finite, and
    validation (running statistics) is NaN from the first epoch, as when a run diverges."""
    import torch
    from torchvision.models import resnet18

    state = resnet18(weights=None).state_dict()
    for name, value in state.items():
        if name.endswith("running_var"):
            value.fill_(float("nan"))
    weights = tmp_path / "nan_bn.pt"
    torch.save(state, weights)
    r = run_mltrain("model.pretrained=true", f"model.weights={weights}", "trainer.epochs=2", "data.image_size=16",
                    "trainer.batch_size=32", "trainer.print_frequency=1000", cwd=project, timeout=300)
    assert r.rc == 1, r.out[-2000:] + r.err
    run = only_run(home)
    assert run["status"] == "Failed" and "NaNLossError: validation loss is nan after epoch 1" in run["error"]
    assert not (home / "runs" / run["id"] / "outputs" / "model").exists(), "a diverged model is not saved"


@pytest.mark.slow
def test_a_corrupt_image_is_the_designers_dataset_error_naming_the_file(home, project, tmp_path):
    from train_support import FAST, data_args, write_digits

    train = write_digits(tmp_path / "train", per_class=4)
    val = write_digits(tmp_path / "val", per_class=2, offset=100)
    broken = train / "1" / "broken.png"
    broken.write_bytes(b"not a png at all")
    r = run_mltrain(*data_args(train, val), *FAST, "trainer.epochs=1", cwd=project, timeout=300)
    assert r.rc == 1 and "Traceback" not in r.err
    run = only_run(home)
    assert run["status"] == "Failed"
    assert f"InvalidDatasetError: '{broken}' is not a readable image (UnidentifiedImageError)" in run["error"]


@pytest.mark.slow
def test_corrupt_weights_in_a_model_directory_are_the_designers_error(home, project, tmp_path):
    from train_support import write_digits

    model = tmp_path / "model"
    model.mkdir()
    (model / "model_spec.json").write_text(json.dumps({"name": "resnet18", "class_names": ["0", "1", "2"],
                                                       "num_classes": 3, "image_size": 16}))
    (model / "weights.pt").write_bytes(b"\x80\x04garbage")
    images = write_digits(tmp_path / "images", per_class=1)
    r = run_mltrain("job=score_image_model", f"job.model_dir={model}", f"job.image_dir={images}", cwd=project,
                    timeout=300)
    assert r.rc == 1 and "Traceback" not in r.err
    run = only_run(home)
    assert run["status"] == "Failed"
    assert f"InvalidModelDirectoryError: '{model / 'weights.pt'}' (job.model_dir) cannot be read as weights" \
        in run["error"]


def test_env_save_keeps_a_spec_already_there(home, project, tmp_path):
    out = tmp_path / "env"
    first = run_mltrain("env", "save", "current", str(out), cwd=project)
    assert first.rc == 0, first.err
    before = (out / "azureml_environment.json").read_bytes()
    again = run_mltrain("env", "save", "AzureML-PyTorch-1.6-GPU", str(out), cwd=project)
    assert again.rc == 2 and again.err.count("\n") == 1 and "already exists; nothing was written" in again.err
    assert (out / "azureml_environment.json").read_bytes() == before
    forced = run_mltrain("env", "save", "AzureML-PyTorch-1.6-GPU", str(out), "--overwrite", cwd=project)
    assert forced.rc == 0 and "AzureML-PyTorch-1.6-GPU" in (out / "azureml_environment.json").read_text()


def test_a_lone_run_keeps_its_record_and_leaves_no_sweep_folder(home, project):
    home.rmdir()  # the runs root is made by this run: cleaning up must not take the run with it
    r = run_mltrain("job=command", "job.command=false", cwd=project)
    assert r.rc == 1 and "Failed" in r.out
    assert only_run(home)["status"] == "Failed"
    assert not (home / "runs" / "_sweeps").exists(), "a run without -m is not a sweep"


def _a_file(tmp_path):
    (tmp_path / "taken").write_text("mine\n")
    return tmp_path / "taken"


#: Management commands given a place they cannot write, or a store they cannot open: (args, the line).
#: {file} is an existing file of the user's, which must come out unchanged.
MANAGEMENT_REFUSED = [
    (["env", "save", "current", "{file}"],
     "{file} is a file, not a folder; nothing was written (name a folder: the spec is saved in it as "
     "azureml_environment.json)"),
    (["env", "save", "current", "{file}/sub"], "cannot create {file}/sub ({file}/sub: Not a directory); nothing was written"),
    (["runs", "plot", "curve", "-o", "{file}/p.png"], "-o {file}/p.png: cannot create the folder {file} ({file} is a file)"),
    (["models", "list"], "MLTRAIN_TRACKING_URI: 'nosuch://store' has a scheme MLflow cannot keep models in (supported: "),
]


@pytest.mark.parametrize("args, expected", MANAGEMENT_REFUSED, ids=[" ".join(a) for a, _ in MANAGEMENT_REFUSED])
def test_a_management_command_refused_in_one_line(home, project, tmp_path, args, expected):
    if "plot" in args:
        assert run_mltrain("job=script", "job.script=curve.py", "job.arguments=[--pause,0]", "run.id=curve",
                           cwd=project).rc == 0
    if "models" in args:
        pytest.importorskip("mlflow")
    taken = _a_file(tmp_path)
    args = [a.replace("{file}", str(taken)) for a in args]
    r = run_mltrain(*args, cwd=project, env={"MLTRAIN_TRACKING_URI": "nosuch://store"})
    assert r.rc == 2 and "Traceback" not in r.out + r.err, r.out + r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mltrain: error: {expected.replace('{file}', str(taken))}"), r.err
    assert taken.read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["taken", "home", "proj"]), "nothing else is written"


def test_runs_plot_makes_the_folder_it_is_given(home, project, tmp_path):
    """A folder that does not exist yet is made (as `mkdir -p` would): asking for it is not a mistake."""
    assert run_mltrain("job=script", "job.script=curve.py", "job.arguments=[--pause,0]", "run.id=curve",
                       cwd=project).rc == 0
    r = run_mltrain("runs", "plot", "curve", "-o", "missing/folder/p.png", cwd=project)
    assert r.rc == 0 and (project / "missing" / "folder" / "p.png").stat().st_size > 0, r.err


def test_more_nodes_than_the_partition_has_is_refused_naming_both(home, project):
    from slurm_support import require_cluster

    require_cluster()
    # the test cluster's default partition and its size, as sinfo shows them (`debug*  1`)
    rows = subprocess.run(["sinfo", "-h", "-o", "%P %D"], capture_output=True, text=True).stdout.split("\n")
    name, nodes = next(row.split() for row in rows if row.split() and row.split()[0].endswith("*"))
    nodes_word = "node" if nodes == "1" else "nodes"
    for dry in ([], ["--dry-run"]):
        r = run_mltrain("job=command", "job.command=true", "compute=slurm", "distribution=pytorch",
                        "distribution.node_count=64", *dry, cwd=project)
        assert r.rc == 2 and r.err.strip().splitlines() == [
            f"mltrain: error: distribution.node_count: 64 nodes asked of Slurm partition '{name.rstrip('*')}', "
            f"which has {nodes} {nodes_word}"], r.err
        assert _nothing_written(home)
