"""Every code block of the README and of the documentation site (docs/, the pages in the order of
mkdocs.yml's navigation), run as printed, in a user's project folder that holds the files they print
(`# my-proj/train.py`, `# .mltrain/...` headers) and the data folders they name. The concept pages run
first, in the navigation's order, then the two tour pages (the site's home page and the README); a command
line an earlier page has already run is not run again (the tours repeat many; a page's own repeats, such as a
pipeline run twice to show its reuse, all run).
Three kinds of change only, each listed in COMMANDS with its reason: training made short by overrides
appended to the command, a dry run for what this machine cannot run (GPUs, a GPU partition, a container
runtime), and the set-up and test commands, which are the test command itself. A command COMMANDS does not
list fails the test: the pages and this table change together.

HOME is the test's own folder, so `~/.mltrain` in the pages is this test's, as it is a user's."""
from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import SCRIPTS, ci, require
from train_support import write_digits

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: The tour pages: they repeat commands of the concept pages, and run last.
TOURS = ("docs/index.md", "README.md")
pytestmark = pytest.mark.slow

# The built-in trainer, seconds instead of minutes: one epoch, small images; after the first run on the
# bundled sample (1,797 images), the project's own 48 images.
SAMPLE = ["trainer.epochs=1", "data.image_size=16"]
SHORT = SAMPLE + ["data=image_directory", "data.train_dir=./train", "data.val_dir=./val"]
SETUP = "set-up: scripts/test.sh runs it before the tests"
TESTS = "the test command itself"
CAMPAIGN = "the fault-injection campaign: tests/test_chaos.py replays its seeds through the same code"
NO_GPU = "dry run: needs GPUs / a GPU partition this machine lacks"
NO_CONTAINER = "dry run: needs pyxis (a container runtime) on the cluster"

#: command as the README prints it (quotes as the shell reads them, comment removed) -> how it is run.
#: ("run", extra overrides) runs it; ("dry", reason) appends --dry-run; ("skip", reason) runs nothing; ("fails",
#: reason) runs it as printed and expects it to fail, as the page says it does (exit non-zero, no traceback).
COMMANDS = {
    'mltrain models register labels --path serve/model': ("run", []),
    'mltrain endpoints create digits-api': ("run", []),
    'mltrain endpoints deploy digits-api --name blue --model labels --code serve --scoring-script score.py': ("run", []),
    'mltrain endpoints invoke digits-api --data {"data": [4, 2]}': ("run", []),
    'mltrain endpoints deploy digits-api --name green --model labels --code serve --scoring-script score.py': ("run", []),
    'mltrain endpoints traffic digits-api blue=90 green=10': ("run", []),
    'mltrain endpoints invoke digits-api --deployment green --data {"data": [7]}': ("run", []),
    'mltrain endpoints show digits-api': ("run", []),
    'mltrain endpoints logs digits-api --deployment green --lines 5': ("run", []),
    'mltrain endpoints traffic digits-api blue=0 green=100': ("run", []),
    'mltrain endpoints delete digits-api --deployment blue': ("run", []),
    'mltrain endpoints delete digits-api': ("run", []),
    "bash scripts/setup.sh": ("skip", SETUP),
    "python benchmarks/chaos.py --seeds 1-20 --json out.json": ("skip", CAMPAIGN),
    "python benchmarks/chaos.py --seeds 67": ("skip", CAMPAIGN),
    "python benchmarks/chaos.py --plan --seeds 1-20": ("skip", CAMPAIGN),
    ".venv/bin/mltrain": ("run", SAMPLE),
    "bash scripts/test.sh": ("skip", TESTS),
    ".venv/bin/pytest -q tests/unit": ("skip", TESTS),
    ".venv/bin/pytest -q -m not slow -n 2 --dist loadgroup": ("skip", TESTS),
    "mltrain": ("run", SHORT),
    "mltrain job=script job.source_directory=./my-proj job.script=train.py job.arguments=[--lr,0.1]": ("run", []),
    "mltrain -m trainer.learning_rate=0.1,0.01": ("run", SHORT),
    "mltrain --help": ("run", []),
    "mltrain distribution=pytorch distribution.process_count_per_node=2 --dry-run": ("run", []),
    "mltrain --cfg job": ("run", []),
    "mltrain runs list": ("run", []),
    "mltrain job=script job.source_directory=./my-proj job.script=hang.py distribution=pytorch "
    "distribution.process_count_per_node=2 distribution.backend=gloo run.hang_timeout_min=0.25":
        ("fails", "the page shows a run that hangs and is ended Failed"),
    "mltrain job=script job.source_directory=./my-proj job.script=train.py distribution=pytorch "
    "distribution.node_count=2 distribution.process_count_per_node=2 distribution.backend=gloo": ("run", []),
    "CUDA_VISIBLE_DEVICES=0,1,2,3 mltrain -m job=script job.source_directory=./my-proj job.script=show_gpus.py "
    "compute.gpus=1 compute.max_concurrent_jobs=4 +job.params.i=range(0,8)": ("run", []),
    "CUDA_VISIBLE_DEVICES=0,1,2,3 mltrain job=script job.source_directory=./my-proj job.script=show_gpus.py "
    "distribution=pytorch distribution.process_count_per_node=2 distribution.backend=gloo compute.gpus_per_task=1 "
    "run.console=all": ("run", []),
    "mltrain runs show": ("run", []),
    "mltrain runs logs": ("run", []),
    "mltrain runs status": ("run", []),
    "mltrain compute=workstation": ("run", SHORT),
    "mltrain experiment=ddp_train": ("run", []),
    "mltrain compute=slurm distribution=pytorch distribution.node_count=2 distribution.process_count_per_node=4 "
    "compute.gpus_per_node=4 compute.partition=gpu compute.timeout_min=240": ("dry", NO_GPU),
    "mltrain -m trainer.learning_rate=0.1,0.01,0.001 compute=slurm": ("run", SHORT),
    # the test cluster declares 4 GPUs to Slurm (scripts/slurm_cluster.sh): these run for real there
    "mltrain job=command job.command=echo rank $RANK sees GPU $CUDA_VISIBLE_DEVICES compute=slurm distribution=pytorch "
    "distribution.process_count_per_node=2 distribution.backend=gloo compute.gpus_per_task=1 run.console=all": ("run", []),
    "mltrain -m job=command job.command=echo member ${job.params.i} sees GPU $CUDA_VISIBLE_DEVICES compute=slurm "
    "compute.gpus_per_node=1 compute.array_parallelism=4 +job.params.i=range(0,8)": ("run", []),
    "mltrain job=command job.command=true compute=slurm compute.gpus_per_task=8":
        ("fails", "the page shows more GPUs than the test cluster's nodes have, refused in one line"),
    'mltrain -m job=command job.command="echo seed ${job.params.seed}" compute=slurm compute.pack=8 '
    "+job.params.seed=range(0,100)": ("run", []),
    'mltrain -m job=command job.command="echo seed ${job.params.seed}" compute=slurm compute.pack=8 '
    "+job.params.seed=range(0,10000) hydra.sweep.dir=seeds --detach": ("run", []),
    "mltrain runs cancel seeds": ("run", []),
    "mltrain compute=slurm job=command job.command=\"sleep 600\" run.id=long-job --detach": ("run", []),
    "mltrain runs status long-job": ("run", []),
    "mltrain runs cancel long-job": ("run", []),
    "mltrain runs resume long-job --detach": ("run", []),
    "mltrain job=script job.source_directory=./my-proj job.script=train.py distribution=mpi "
    "distribution.process_count_per_node=2": ("run", []),
    "mltrain distribution=mpi distribution.process_count_per_node=2": ("run", SHORT),
    "mltrain distribution=mpi distribution.process_count_per_node=2 compute=slurm": ("run", SHORT),
    ".venv/bin/pip install -q .[horovod]": ("skip", SETUP),
    ".venv/bin/mltrain horovod build": ("skip", SETUP),
    "mltrain job=script job.script=train_hvd.py distribution=mpi distribution.process_count_per_node=2 "
    "distribution.horovod=true": ("run", []),
    "mltrain distribution=mpi distribution.process_count_per_node=2 distribution.horovod=true": ("run", SHORT),
    "mltrain distribution=mpi distribution.process_count_per_node=2 distribution.horovod=true compute=slurm":
        ("run", SHORT),
    "mltrain job=script job.source_directory=./my-proj job.script=train.py distribution=pytorch "
    "distribution.process_count_per_node=2 distribution.backend=gloo job.arguments=[--dist-backend,gloo,"
    "--dist-url,$AZ_BATCHAI_PYTORCH_INIT_METHOD,--rank,$AZ_BATCHAI_TASK_INDEX,--world-size,2]": ("run", []),
    "mltrain env list": ("run", []),
    "mltrain env show AzureML-PyTorch-1.6-GPU": ("run", []),
    "mltrain env save AzureML-PyTorch-1.6-GPU ./env": ("run", []),
    "mltrain environment=AzureML-PyTorch-1.6-GPU compute=slurm": ("dry", NO_CONTAINER),
    "mltrain job=script job.source_directory=./my-proj job.script=train.py environment.name=my-env "
    "environment.python.user_managed=false environment.pip=[\"six==1.16.0\"]": ("run", []),
    "mltrain model=densenet121 trainer.epochs=2 distribution=pytorch distribution.process_count_per_node=2":
        ("run", SHORT[:1] + SHORT[2:] + ["data.image_size=32"]),  # DenseNet halves the image 5 times
    "mltrain data=image_directory data.train_dir=./train data.val_dir=./val model=resnet50 run.id=my-model":
        ("run", SHORT),
    "mltrain job=score_image_model job.model_dir=$HOME/.mltrain/runs/my-model/outputs/model "
    "job.image_dir=./new-images": ("run", []),
    ".venv/bin/mltrain -m trainer.learning_rate=choice(0.01,2) trainer.epochs=2 data.image_size=16 "
    "sweep.primary_metric=top1_accuracy sweep.max_concurrent_runs=2 sweep.early_termination.policy=bandit "
    "sweep.early_termination.slack_factor=0.2": ("run", SHORT[2:]),
    ".venv/bin/mltrain runs best": ("run", []),
    "mltrain -m experiment=lr_search": ("run", ["sweep.max_total_runs=2", *SHORT[:1], *SHORT[2:], "data.image_size=32"]),
    ".venv/bin/mltrain -m trainer.learning_rate=interval(0.001,0.1) trainer.batch_size=choice(16,32) "
    "sweep.sampling=bayesian sweep.max_total_runs=6 sweep.primary_metric=val_loss sweep.goal=minimize --dry-run":
        ("run", []),
    "mltrain trainer.export_onnx=true run.id=digits-onnx": ("run", SHORT),
    "mltrain models register digits --run digits-onnx --path outputs/model --tag stage=dev": ("run", []),
    "mltrain models list": ("run", []),
    "mltrain models download digits:1 ./digits-model": ("run", []),
    "mltrain job=score_image_model job.model_dir=./digits-model job.image_dir=./new-images job.runtime=onnxruntime":
        ("run", []),
    "mltrain runs plot digits-onnx -o curves.png": ("run", []),
    "mltrain runs rerun digits-onnx": ("run", []),
    "mltrain runs sync": ("run", []),
    "mltrain pipeline=digits": ("run", []),
    "python photos.py": ("run", []),
    "mltrain job=convert_to_image_directory job.input_path=./photos.zip run.id=photos": ("run", []),
    "mltrain pipeline=image_classification": ("run", ["trainer.epochs=1"]),
    "mltrain pipeline=digits compute=slurm": ("run", []),
    "mltrain job create --file train-job.yml": ("run", []),
    "mltrain job=parallel job.source_directory=./my-proj job.entry_script=score.py job.input_data=./new-images "
    "job.mini_batch_size=8 job.max_concurrency_per_instance=2 distribution.node_count=2 "
    "job.program_arguments=[--label,png]": ("run", []),
    "mltrain job create --file score-job.yml": ("run", []),
    "mltrain job=parallel job.source_directory=./my-proj job.entry_script=score.py job.input_data=./new-images "
    "job.max_concurrency_per_instance=2 compute=slurm": ("run", []),
    "mltrain job create --file train-job.yml --set inputs.lr=0.05 --name lr-005 --dry-run": ("run", []),
    "mltrain job create --file train-job.yml compute=slurm": ("run", []),
    "python my_app.py -m lr=0.1,0.01 hydra/launcher=mltrain": ("run", []),
    "python my_app.py -m lr=0.1,0.01 hydra/launcher=mltrain_slurm hydra.launcher.partition=debug "
    "hydra.launcher.timeout_min=30": ("run", []),
    # the Azure ML v1 SDK page: a workspace's config.json and seed 001's control code
    "echo {\"subscription_id\": \"0000\", \"resource_group\": \"rg\", \"workspace_name\": \"birds\"} > config.json": ("run", []),
    "python control.py": ("run", []),
    "python publish.py": ("run", []),  # the same page's published pipeline and endpoint
    # the Azure ML v2 SDK page (azure-ai-ml through mltrain's client)
    "pip install mltrain[azure]": ("skip", "set-up: the test extra has azure-ai-ml and azure-identity"),
    "MLTRAIN_AZUREML=1 python my_notebook_as_script.py": ("skip", "stands for a script of your own: sdk_job.py on the page is one, run"),
    "MLTRAIN_AZUREML=1 jupyter lab": ("skip", "a notebook server, interactive"),
    "python -m mltrain.azureml.sdk_v2.run_notebook my_notebook.ipynb": ("skip", "stands for a notebook of your own"),
    "MLTRAIN_AZUREML=1 python sdk_job.py": ("run", []),
    # the migration guides' worked examples
    "mltrain job create --file prep-job.yml --set inputs.lr=0.05 --name prep --dry-run": ("run", []),
    "mltrain job create --file prep-job.yml --name prep": ("run", []),
    "mltrain runs show prep": ("run", []),
    "python my_app.py -m lr=0.1,0.01 hydra/launcher=mltrain_slurm hydra.launcher.partition=debug "
    "hydra.launcher.timeout_min=30 hydra.launcher.max_requeues=1 +hydra.launcher.submitit.comment=migrated": ("run", []),
    # the very abort the page describes: this script leaves its gloo group open, and torchrun's ranks can die
    # in its teardown after the work is done (SIGABRT; 3 of 20 runs in docs/concepts/distribution.md)
    "torchrun --nproc_per_node=2 my-proj/train.py --lr 0.1": ("skip", "printed for comparison: torchrun can abort it"),
    "mltrain job=script job.source_directory=./my-proj job.script=train.py distribution=pytorch "
    "distribution.process_count_per_node=2 job.arguments=[--lr,0.1]": ("run", []),
    "mltrain job=script job.source_directory=./my-proj job.script=train.py compute=slurm compute.partition=gpu "
    "distribution=pytorch distribution.node_count=2 distribution.process_count_per_node=4 --dry-run": ("run", []),
    # docs/concepts/remote.md: the test's remote login (scripts/remote_ssh.sh), as printed
    "mltrain job=script job.source_directory=./my-remote job.script=train.py compute=gpu-cluster": ("run", []),
    "mltrain runs download": ("run", []),
    "mltrain job=script job.source_directory=./my-remote job.script=train.py compute=gpu-cluster --detach": ("run", []),
    "mltrain runs wait": ("run", []),
    "mltrain -m job=script job.source_directory=./my-remote job.script=train.py compute=gpu-cluster "
    "+job.params.seed=1,2,3": ("run", []),
    "mltrain -m job=script job.source_directory=./my-remote job.script=train.py compute=gpu-cluster "
    "sweep.sampling=random sweep.primary_metric=accuracy sweep.max_total_runs=3 +job.params.seed=choice(1,2,3,4)":
        ("run", []),
    "mltrain runs best": ("run", []),
}
NEEDS_SLURM = ("compute=slurm", "mltrain_slurm", "long-job", "runs cancel seeds", "compute=gpu-cluster")
#: docs/concepts/remote.md: the commands that reach the remote login (scripts/remote_ssh.sh)
REMOTE = "compute=gpu-cluster"
REMOTE_FOLLOW = ("mltrain runs show", "mltrain runs download", "mltrain runs wait", "mltrain runs best")


def pages() -> list:
    """The site's pages in the order of mkdocs.yml's navigation, the tour pages last."""
    from test_docs_site import nav_pages

    order = nav_pages()
    found = [DOCS / p for p in order if (DOCS / p).is_file()]  # generated pages (reference/) have no file
    concept = [p for p in found if str(p.relative_to(ROOT)) not in TOURS]
    return concept + [ROOT / t for t in TOURS]


def blocks(sources=None):
    """(source, language, text) of every fenced block, page by page, in order."""
    out = []
    for page in sources or pages():
        name = str(page.relative_to(ROOT))
        out += [(name, lang, text) for lang, text in re.findall(r"```(\w*)\n(.*?)```", page.read_text(), re.S)]
    return out


def commands(text: str):
    """(tokens, line) of each shell command of a bash block, continuation lines joined; `a && b` is
    two commands. The tokens (quotes removed, no comment) name it in COMMANDS; the line is what runs."""
    for line in text.replace("\\\n", " ").splitlines():
        for part in line.split(" && "):
            tokens = shlex.split(part, comments=True)
            if tokens:
                yield tokens, part


def header(text: str):
    """A printed file's path and the command its header names (`# path   -> command`)."""
    for line in text.splitlines()[:2]:
        m = re.match(r"#\s+(\S+\.(?:py|yaml|yml))\s*(?:->\s*(.+))?$", line)
        if m:
            return m.group(1), m.group(2)
    return None, None


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A user's project: the README's files, digit images in ./train, ./val and ./new-images."""
    home = tmp_path / "user"
    project = home / "project"
    project.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("MLTRAIN_HOME", raising=False)
    write_digits(project / "train", per_class=16)
    write_digits(project / "val", per_class=6, offset=100)
    write_digits(project / "new-images", per_class=2, offset=150)
    # The README names a Horovod script without printing one: any will do.
    shutil.copy(SCRIPTS / "hvd_mnist.py", project / "train_hvd.py")
    return project


def test_every_readme_block_runs_as_printed(workspace):
    from horovod_support import horovod_problem
    from mpi_support import mpi_problem
    from slurm_support import cluster_problem

    slurm, mpi, horovod = cluster_problem(), mpi_problem(), horovod_problem()
    remote = None if os.environ.get("MLTRAIN_SSH_CONFIG") else "no remote login: scripts/remote_ssh.sh (test.sh starts it)"
    on_remote = False  # the remote page's follow-up commands (runs show, download, wait) need its run
    azure = None if _importable("azure.ai.ml") else "no azure-ai-ml: pip install 'mltrain[azure]' (scripts/test.sh does)"
    unknown, skipped, ran, sources = [], [], {}, set()
    printed = {}
    for source, _, text in blocks():  # the printed files first: commands early in a page use them
        path, _ = header(text)
        if path:
            assert printed.setdefault(path, text) == text, f"{path} is printed twice, differently ({source})"
            (workspace / path).parent.mkdir(parents=True, exist_ok=True)
            (workspace / path).write_text(text)
    for source, lang, text in blocks():
        sources.add(source)
        path, named = header(text)
        if path:  # a printed file: run the command its header names
            todo = [(shlex.split(named), named)] if named else []
        elif lang == "bash":
            todo = list(commands(text))
        elif lang == "python":  # the metric API runs inside a run; the Python API from the project folder
            script = workspace / "readme_snippet.py"
            script.write_text(text)
            line = "python readme_snippet.py" if "import mltrain\n" in text else "mltrain job=script job.script=readme_snippet.py"
            _run(line, workspace, f"python block of {source}:\n" + text)
            continue
        else:
            continue
        for tokens, line in todo:
            key = " ".join(tokens)
            if key not in COMMANDS:
                unknown.append(f"{source}: {key}")
                continue
            mode, detail = COMMANDS[key]
            if mode == "skip":
                skipped.append(key)
                continue
            if ran.get(key, source) != source:  # the same line printed on an earlier page (a tour repeats many)
                print(f"already run as printed in {ran[key]}: {key}")
                continue
            needs = [(slurm, "MLTRAIN_REQUIRE_SLURM", "a Slurm cluster")
                     if mode == "run" and "--dry-run" not in tokens and any(n in key for n in NEEDS_SLURM) else None,
                     (mpi, "MLTRAIN_REQUIRE_MPI", "MPI") if "distribution=mpi" in key else None,
                     (horovod, "MLTRAIN_REQUIRE_HOROVOD", "Horovod") if "horovod=true" in key else None,
                     (azure, "MLTRAIN_REQUIRE_AZURE", "azure-ai-ml") if "MLTRAIN_AZUREML=1" in key else None,
                     (remote, "MLTRAIN_REQUIRE_SLURM", "the remote login")
                     if REMOTE in key or (on_remote and key in REMOTE_FOLLOW) else None]
            missing = [n for n in needs if n and n[0]]
            if missing and not (ci() or any(os.environ.get(n[1]) == "1" for n in missing)):
                print(f"not run here ({missing[0][0]}): {key}")  # on a laptop: the rest still runs
                continue
            for problem, variable, what in missing:
                require(problem, variable, what)  # under CI: a failure
            extra = detail if mode == "run" else [] if mode == "fails" else ["--dry-run"]
            line = line.split(" #", 1)[0].rstrip() + "".join(" " + shlex.quote(x) for x in extra)
            started = time.monotonic()
            out = _run(line, workspace, f"{source}: {key}", fails=mode == "fails")
            print(f"{time.monotonic() - started:6.1f}s  {source}: {key}")
            ran.setdefault(key, source)
            on_remote = REMOTE in key or (on_remote and key in REMOTE_FOLLOW)
            _check(key, out, workspace)
    assert not unknown, "commands of the pages this test does not know (add them to COMMANDS):\n" + "\n".join(unknown)
    assert skipped and all(COMMANDS[k][0] == "skip" for k in skipped)
    assert any(COMMANDS[k][0] == "fails" for k in ran), "the page's failing example was not run"
    assert (workspace / "model.pt").is_file(), "the Python API block downloads outputs/model.pt"
    assert {"README.md", "docs/getting-started.md", "docs/migration/from-torchrun-torchx.md"} <= sources


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def _run(line: str, cwd: Path, what: str, fails: bool = False) -> str:
    """One command line through bash, as a user types it: mltrain and python are this venv's (first on
    PATH, as after `source .venv/bin/activate`), and `.venv/bin/...` works from the project folder."""
    venv = Path(sys.executable).parent.parent
    if not (cwd / ".venv").exists():
        (cwd / ".venv").symlink_to(venv)
    env = {**os.environ, "PATH": os.pathsep.join([str(venv / "bin"), os.environ["PATH"]])}
    proc = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert (proc.returncode != 0) == fails and "Traceback" not in out, f"{what}\nexit {proc.returncode}\n{out[-3000:]}"
    return out


def _check(key: str, out: str, project: Path) -> None:
    """What a reader of the README would look for in a few of the outputs."""
    if key == "mltrain job=script job.source_directory=./my-remote job.script=train.py compute=gpu-cluster":
        assert "training on" in out and "as uid 0" not in out, out  # the cluster's user ran it
    elif key == "mltrain runs best":  # the remote HyperDrive sweep's record, brought back
        assert "sweep of 3 runs (random, accuracy maximize)" in out and "best:" in out, out
    elif key == "mltrain runs download":
        runs = project.parent / ".mltrain" / "runs"
        assert [p.read_text() for p in runs.glob("*/outputs/model.txt")] == ["weights\n"], out
    elif key.startswith("mltrain runs status long-job"):
        assert "long-job" in out and "(Slurm job " in out
    elif key == "mltrain env save AzureML-PyTorch-1.6-GPU ./env":
        assert (project / "env" / "azureml_environment.json").is_file()
    elif key.startswith("mltrain job=score_image_model"):
        runs = project.parent / ".mltrain" / "runs"
        scored = next(runs.glob("score*/outputs/predictions.csv"))
        assert len(scored.read_text().splitlines()) == 1 + 6  # a header and one line per image
    elif key.startswith("mltrain endpoints invoke digits-api --data"):
        assert '["four", "two"]' in out, out  # the scoring script's answer, through Azure's server
    elif key.startswith("mltrain models download"):
        assert (project / "digits-model" / "model.onnx").is_file()
    elif key == "mltrain runs plot digits-onnx -o curves.png":
        assert (project / "curves.png").stat().st_size > 10_000
    elif "sees GPU $CUDA_VISIBLE_DEVICES" in key and "gpus_per_task=1" in key:  # Slurm gave each rank its own
        seen = dict(re.findall(r"rank (\d) sees GPU (\d)$", out, re.M))
        assert len(seen) == 2 and seen["0"] != seen["1"], out
    elif "member ${job.params.i} sees GPU" in key:  # 8 one-GPU members, 4 at a time, on all 4 declared devices
        seen = re.findall(r"member \d sees GPU (\d)$", out, re.M)
        assert len(seen) == 8 and set(seen) == {"0", "1", "2", "3"}, out
    elif key.endswith("compute.gpus_per_task=8"):  # refused before submission; where no Slurm is, for that
        assert "mltrain: error: compute.gpus_per_task: 8 per task x 1 task per node" in out or (
            "no Slurm here" in out and not ci()), out
    elif key == "mltrain pipeline=digits compute=slurm":
        assert out.count("reused: run ") == 3 and "pipeline digits Completed (3 steps)" in out
    elif "range(0,10000)" in key:  # ten thousand members queued, the workers make them as they take them
        assert "9999 more members are queued" in out and "sweep of 10000 runs" in out
    elif key == "mltrain runs cancel seeds":  # what no worker had taken ends without being made
        assert "never made" in out and "Canceled" in out
    elif "compute.pack=8" in key:  # a hundred members in a few worker jobs, each with its own run
        assert "sweep of 100 runs" in out and "seed 99" in out
        # each member's own log says which worker ran it (the console shows "Running (in packed Slurm job N)" only
        # for members the driver looked at while they ran: an `echo` member may start and end between two looks)
        runs = project.parent / ".mltrain" / "runs"
        packed = [p for p in runs.glob("*/logs/launcher.log") if "Running in packed Slurm job" in p.read_text()]
        assert len(packed) >= 100, len(packed)
    elif key.startswith("mltrain job=parallel") or key == "mltrain job create --file score-job.yml":
        images = sorted(p.name for p in (project / "new-images").rglob("*") if p.is_file())
        assert f"{len(images)} rows" in out and "parallel job succeeded" in out, out  # each image scored once
    elif key == "mltrain experiment=ddp_train":
        assert "sum 3.0 lr 0.05" in out  # two ranks all-reduced, the experiment's arguments
    elif key == "mltrain job create --file train-job.yml":
        assert "sum 3.0 lr 0.1" in out  # the v2 file's two ranks all-reduced, its input as the argument
    elif "--world-size,2]" in key or ("distribution.process_count_per_node=2" in key
                                                                    and key.endswith("job.arguments=[--lr,0.1]")):
        assert "sum 3.0 lr 0.1" in out  # two ranks all-reduced
    elif key == "mltrain job create --file prep-job.yml --name prep":
        assert "lr 0.01" in out
        labels = project.parent / ".mltrain" / "runs" / "prep" / "outputs" / "labels" / "labels.txt"
        assert labels.read_text().split() == sorted(d.name for d in (project / "train").iterdir())  # ./train's label folders
    elif key.endswith("distribution.process_count_per_node=4 --dry-run"):
        assert "#SBATCH --nodes=2" in out and "#SBATCH --ntasks-per-node=4" in out
    elif "distribution.node_count=2 distribution.process_count_per_node=2 distribution.backend=gloo" in key:
        assert "sum 10.0 lr 0.1" in out and "2 nodes simulated on this machine" in out  # 4 ranks all-reduced
    elif "job.script=hang.py" in key:  # the hang found, the rank and its line named
        # the printed file's first line is its name: the sleep is line 6, the all-reduce line 8
        assert re.search(r"hung: no progress for 0\.25 min; rank 1 on \S+: hang\.py:6 in <module>; rank 0 waits in "
                         r"all_reduce \(hang\.py:8 in <module>\)", out), out
    elif "show_gpus.py compute.gpus=1" in key:  # eight trials, each on one device, all four devices used
        seen = re.findall(r"rank 0 sees GPUs (\S+)", out)
        assert len(seen) == 8 and set(seen) == {"0", "1", "2", "3"}, out
    elif "show_gpus.py" in key and "gpus_per_task=1" in key:  # two ranks, a device each
        seen = dict(re.findall(r"rank (\d) sees GPUs (\S+)", out))
        assert len(seen) == 2 and seen["0"] != seen["1"], out
    elif key == "MLTRAIN_AZUREML=1 python sdk_job.py":  # two ranks, a job made with azure-ai-ml
        assert "rank 0 of 2" in out and "Completed" in out
    elif key == "python control.py":  # the v1 seed: registered, downloaded and read back
        assert "b'weights'" in out
    elif "+hydra.launcher.submitit.comment=migrated" in key:
        assert "training with lr=0.1" in out and "training with lr=0.01" in out


def test_the_table_lists_only_what_the_pages_print():
    printed = set()
    for _, lang, text in blocks():
        path, named = header(text)
        if named:
            printed.add(" ".join(shlex.split(named)))
        elif lang == "bash":
            printed.update(" ".join(t) for t, _ in commands(text))
    assert sorted(set(COMMANDS) - printed) == [], "COMMANDS lists commands no page prints"


def test_every_page_with_code_is_run():
    """Every Markdown page under docs/ is in the navigation, so its blocks are run; the README too."""
    run = {str(p.relative_to(ROOT)) for p in pages()}
    on_disk = {str(p.relative_to(ROOT)) for p in DOCS.rglob("*.md")}
    assert on_disk - run == set(), "pages outside mkdocs.yml's nav: their blocks would not run"
    assert "README.md" in run
