"""Conformance: Azure's own SDK v1 notebooks (github.com/Azure/MachineLearningNotebooks,
`how-to-use-azureml/ml-frameworks/pytorch/` and `how-to-use-azureml/machine-learning-pipelines/`) run
cell by cell as a user's `control.py` against mltrain's azureml stand-ins, from a fetched copy outside
this repository. Writes a markdown table (notebook | cells run | passed | result / first failure) and a
JSON file with every cell's outcome.

For each notebook a fresh workspace folder is made in a temp folder: the notebook's own folder copied in
(its training scripts), Azure's `config.json`, `.mltrain/compute/NAME.yaml` (`defaults: [local_schema,
_self_]`) for every cluster name the notebook uses, `.mltrain/datastores.yaml` mapping the web URLs the
notebooks read to small generated local files, and `MLTRAIN_HOME` pointing at a temp folder. The code
cells are extracted into `control.py`, which runs them in order in one namespace (as Jupyter's
"Run All" that goes on after errors) and records each cell: passed, failed (exception type, first line of
its message, the notebook's line that made the v1 call, where it was raised) or refused (a deployment cell
that raised a one-line NotImplementedError). Deployment cells run on mltrain's endpoint engine: the service is
a server process on this machine, deleted after the notebook if a cell did not delete it.

What is changed in Azure's cells, and nothing else:
- `%`/`!` magic lines are dropped; `%%writefile PATH` cells write their body to PATH (as Jupyter does).
- data downloads (`urllib.request.urlretrieve`, `requests.get`) read the same URLs from generated local
  files (`_offline.*`); a URL with no local copy raises "needs data: URL".
- training scripts that need internet data or a framework absent here (fowl images + ImageNet weights,
  CIFAR-10, TensorFlow) are replaced in the workspace copy by synthetic stand-ins with the same arguments,
  logged metrics and outputs (see STAND_INS); the table says so.
- a notebook written for an older library may get an environment variable that restores that library's old
  default (ENVIRONMENT; the table says which and why).

Usage: .venv/bin/python benchmarks/azure_v1_notebooks.py /tmp/aml-notebooks [--only SUBSTR]
       [--cell-timeout 300] [--md benchmarks/azure_v1_notebooks.md] [--keep DIR]
       where /tmp/aml-notebooks holds
       git --git-dir=$(fetch Azure/MachineLearningNotebooks) archive HEAD how-to-use-azureml/ml-frameworks/pytorch \
           how-to-use-azureml/machine-learning-pipelines | tar x -C /tmp/aml-notebooks
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

FOLDERS = ("how-to-use-azureml/ml-frameworks/pytorch", "how-to-use-azureml/machine-learning-pipelines")
CONFIG = {"subscription_id": "00000000-0000-0000-0000-000000000000", "resource_group": "rg",
          "workspace_name": "notebooks", "location": "westus2"}
DEPLOY = re.compile(r"\b(\.deploy\(|Webservice|InferenceConfig|deploy_configuration|service\.)")
CLUSTER = re.compile(r"""(?:cluster_name|compute_target|compute_name)\s*=\s*(?:os\.environ\.get\(\s*["'][A-Z_]+["']\s*,\s*)?"""
                     r"""["']([A-Za-z][\w-]*)["']""")


# ---------------------------------------------------------------------------------------------- local data
def _csv(rows: list[list], header: list[str]) -> bytes:
    return ("\n".join(",".join(map(str, r)) for r in [header] + rows) + "\n").encode()


def _titanic() -> bytes:
    header = ["PassengerId", "Survived", "Pclass", "Name", "Sex", "Age", "SibSp", "Parch", "Ticket", "Fare",
              "Cabin", "Embarked"]
    return _csv([[i, i % 2, 1 + i % 3, f"Passenger{i}", "male" if i % 2 else "female", 20 + i, 0, 0, f"T{i}",
                  7.25 + i, "", "S"] for i in range(1, 41)], header)


def _iris() -> bytes:
    header = ["sepal_length", "sepal_width", "petal_length", "petal_width", "species"]
    return _csv([[5.0 + i % 7 / 10, 3.0, 1.4 + i % 5, 0.2, ["setosa", "versicolor", "virginica"][i % 3]]
                 for i in range(30)], header)


def _crime() -> bytes:
    header = ["ID", "Date", "Block", "Primary Type", "Arrest", "Domestic", "Beat", "District", "Ward", "Year"]
    return _csv([[i, "2015-01-01", "X", "THEFT", i % 2 == 0, False, 100 + i, i % 5, i % 9, 2015]
                 for i in range(50)], header)


def _oj() -> bytes:
    header = ["WeekStarting", "Store", "Brand", "Quantity", "logQuantity", "Advert", "Price", "Age60"]
    return _csv([[f"1990-06-{1 + i % 28:02d}", 1000 + i % 3, ["dominicks", "tropicana"][i % 2], 100 + i, 4.6, 1,
                  2.5, 0.23] for i in range(30)], header)


def _idx(images: bool, n: int = 64) -> bytes:
    import struct
    body = (struct.pack(">IIII", 2051, n, 28, 28) + bytes((i * 7) % 256 for i in range(n * 784)) if images
            else struct.pack(">II", 2049, n) + bytes(i % 10 for i in range(n)))
    return gzip.compress(body)


def _cifar_tgz() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]:
            payload = pickle.dumps({b"data": bytes(16 * 3072), b"labels": list(range(10)) + [0] * 6}
                                   if name != "batches.meta" else {b"label_names": [b"c%d" % i for i in range(10)]})
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    return buf.getvalue()


URLS = {  # what the notebooks download, generated small
    "https://dprepdata.blob.core.windows.net/demo/Titanic.csv": _titanic,
    "https://dprepdata.blob.core.windows.net/demo/crime0-random.csv": _crime,
    "https://dprepdata.blob.core.windows.net/demo/crime0-test.csv": _crime,
    "https://raw.githubusercontent.com/Azure/azureml-examples/main/sdk/python/jobs/automl-standalone-jobs/"
    "automl-forecasting-orange-juice-sales/data/dominicks_OJ.csv": _oj,
    "https://azureopendatastorage.blob.core.windows.net/mnist/train-images-idx3-ubyte.gz": lambda: _idx(True),
    "https://azureopendatastorage.blob.core.windows.net/mnist/train-labels-idx1-ubyte.gz": lambda: _idx(False),
    "https://azureopendatastorage.blob.core.windows.net/mnist/t10k-images-idx3-ubyte.gz": lambda: _idx(True),
    "https://azureopendatastorage.blob.core.windows.net/mnist/t10k-labels-idx1-ubyte.gz": lambda: _idx(False),
    "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz": _cifar_tgz,
    "https://raw.githubusercontent.com/Azure/MachineLearningNotebooks/master/how-to-use-azureml/"
    "work-with-data/datasets-tutorial/train-with-datasets/train-dataset/iris.csv": _iris,
    "https://raw.githubusercontent.com/Azure/MachineLearningNotebooks/4e7b3784d50e81c313c62bcdf9a330194153d9cd/"
    "how-to-use-azureml/work-with-data/datasets-tutorial/train-with-datasets/train-dataset/iris.csv": _iris,
}

# ------------------------------------------------------------------------------------ training stand-ins
BIRDS = '''"""Stand-in for pytorch_train.py (needs fowl_data.zip and ImageNet weights from the internet): same
arguments, same logged metrics (lr, momentum once; best_val_acc per epoch), same output outputs/model.pt: a whole
pickled module (torch.save(model)) that takes RGB images (N, 3, 224, 224) to 2 classes, as the fine-tuned
ResNet-18 does, so Azure's pytorch_score.py can load it and score the notebook's test image."""
import argparse, os
import torch
from azureml.core.run import Run
run = Run.get_context()
p = argparse.ArgumentParser()
p.add_argument("--num_epochs", type=int, default=25)
p.add_argument("--output_dir", type=str)
p.add_argument("--learning_rate", type=float, default=0.001)
p.add_argument("--momentum", type=float, default=0.9)
a = p.parse_args()
run.log("lr", float(a.learning_rate)); run.log("momentum", float(a.momentum))
torch.manual_seed(0)
x = torch.randn(64, 3, 8, 8); y = (x[:, 0].mean((1, 2)) > 0).long()
model = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(3, 2))
opt = torch.optim.SGD(model.parameters(), lr=a.learning_rate * 100, momentum=a.momentum)
best = 0.0
for epoch in range(a.num_epochs):
    opt.zero_grad(); loss = torch.nn.functional.cross_entropy(model(x), y); loss.backward(); opt.step()
    best = max(best, (model(x).argmax(1) == y).float().mean().item())
    run.log("best_val_acc", best)
print("Best val Acc: {:4f}".format(best))
os.makedirs(a.output_dir, exist_ok=True)
torch.save(model, os.path.join(a.output_dir, "model.pt"))
'''

DDP = '''"""Stand-in for train.py (needs CIFAR-10 and NCCL GPUs): same arguments, torch.distributed from the
same environment variables (WORLD_SIZE, RANK, LOCAL_RANK) over gloo, DDP on synthetic tensors, rank 0 saves
outputs/cifar_net.pt."""
import argparse, os
import torch, torch.nn as nn
p = argparse.ArgumentParser()
p.add_argument("--data-dir"); p.add_argument("--epochs", type=int, default=10)
p.add_argument("--batch-size", type=int, default=16); p.add_argument("--workers", type=int, default=0)
p.add_argument("--learning-rate", type=float, default=0.001); p.add_argument("--momentum", type=float, default=0.9)
p.add_argument("--print-freq", type=int, default=200); p.add_argument("--output-dir", default="outputs")
args = p.parse_args()
assert os.path.isdir(args.data_dir), args.data_dir
world_size = int(os.environ["WORLD_SIZE"]); rank = int(os.environ["RANK"]); local_rank = int(os.environ["LOCAL_RANK"])
distributed = world_size > 1
if distributed:
    torch.distributed.init_process_group(backend="gloo")
model = nn.Linear(3072, 10)
if distributed:
    model = nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=args.learning_rate, momentum=args.momentum)
for epoch in range(args.epochs):
    x = torch.randn(args.batch_size, 3072); y = torch.randint(0, 10, (args.batch_size,))
    opt.zero_grad(); loss = nn.functional.cross_entropy(model(x), y); loss.backward(); opt.step()
    print("Rank %d: [%d] loss: %.3f" % (rank, epoch + 1, loss.item()))
print("Rank %d: Finished Training" % rank)
if rank == 0:
    os.makedirs(args.output_dir, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(args.output_dir, "cifar_net.pt"))
'''

TF_MNIST = '''"""Stand-in for tf_mnist.py (needs TensorFlow, absent here): same arguments, logs validation_acc per
epoch, writes outputs/model/saved_model.pb."""
import argparse, os, random
from azureml.core.run import Run
p = argparse.ArgumentParser()
p.add_argument("--data-folder"); p.add_argument("--batch-size", type=int, default=50)
p.add_argument("--first-layer-neurons", type=int, default=100)
p.add_argument("--second-layer-neurons", type=int, default=100)
p.add_argument("--learning-rate", type=float, default=0.01)
a = p.parse_args()
assert os.path.isdir(a.data_folder), a.data_folder
run = Run.get_context()
acc = 0.5
for epoch in range(4):
    acc = min(0.99, acc + a.learning_rate + a.first_layer_neurons / 5000)
    run.log("validation_acc", acc)
os.makedirs("outputs/model", exist_ok=True)
open("outputs/model/saved_model.pb", "wb").write(b"synthetic")
'''

STAND_INS = {  # notebook stem -> {script path in the notebook folder: (stand-in, why)}
    "train-hyperparameter-tune-deploy-with-pytorch": {"pytorch_train.py": (BIRDS, "fowl images + ImageNet weights")},
    "distributed-pytorch-with-distributeddataparallel": {"train.py": (DDP, "CIFAR-10 + NCCL")},
    "aml-pipelines-parameter-tuning-with-hyperdrive": {"tf_mnist.py": (TF_MNIST, "TensorFlow")},
}

ENVIRONMENT = {  # notebook stem -> {variable: (value, why)}
    "train-hyperparameter-tune-deploy-with-pytorch": {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": (
        "1", "Azure's pytorch_score.py torch.loads a whole pickled module, which torch 2.6 and later refuse by "
             "default (weights_only); the notebook's environment, Azure's acpt-pytorch-2.2 as its requirements pin it "
             "today, has torch 2.10")},
}

# --probe: past the first failures, to find the later ones (the table for --probe says it is not Azure's code)
PROBE = [
    ("pytorch_env = Environment.get(ws, name='azureml-acpt-pytorch-2.2-cuda12.1')",
     "pytorch_env = Environment('probe-this-interpreter')\n"
     "pytorch_env.python.user_managed_dependencies = True"),
    ("PyTorchConfiguration(process_count=2, node_count=2)",
     "PyTorchConfiguration(process_count=2, node_count=2, communication_backend='Gloo')"),
    ("from azureml.core.runconfig import DEFAULT_CPU_IMAGE",
     "DEFAULT_CPU_IMAGE = 'mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04'"),
    ("HyperDriveStep, HyperDriveStepRun, PythonScriptStep", "HyperDriveStep, PythonScriptStep"),
    ("'AzureML-TensorFlow-2.3-GPU'", "'AzureML-tensorflow-2.16-cuda12'"),
    ("from azureml.core.conda_dependencies import CondaDependencies",
     "from azureml.core.environment import CondaDependencies"),
    ("from azureml.core.runconfig import CondaDependencies, DEFAULT_CPU_IMAGE",
     "from azureml.core.environment import CondaDependencies\n"
     "DEFAULT_CPU_IMAGE = 'mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04'"),
    ("from azureml.data.data_reference import DataReference", "from azureml.core.datastore import DataReference"),
    ("from azureml.data.dataset_consumption_config import DatasetConsumptionConfig",
     "from azureml.core.dataset import DatasetConsumptionConfig"),
]

# ---------------------------------------------------------------------------------------------- control.py
CONTROL = r'''# generated by benchmarks/azure_v1_notebooks.py from {notebook}
import json, linecache, os, signal, sys, time, traceback
CELLS = json.loads({cells!r})
RESULTS = {results!r}
TIMEOUT = {timeout}
LOCAL = json.loads({local!r})


class _offline:
    """The notebook's downloads, answered from generated local files."""
    @staticmethod
    def _path(url):
        if os.path.exists(url):
            return url
        if url not in LOCAL:
            raise RuntimeError("needs data: " + url)
        return LOCAL[url]

    @staticmethod
    def urlretrieve(url, filename=None, *args, **kwargs):
        import shutil
        filename = filename or os.path.basename(url)
        shutil.copyfile(_offline._path(url), filename)
        return filename, None

    @staticmethod
    def requests_get(url, *args, **kwargs):
        class Response:
            status_code = 200
            content = open(_offline._path(url), "rb").read()
            text = content.decode("utf-8", "replace")
            def raise_for_status(self):
                pass
        return Response()


def _alarm(*_):
    raise TimeoutError("cell ran past %ds" % TIMEOUT)


signal.signal(signal.SIGALRM, _alarm)
namespace = {{"__name__": "__main__", "_offline": _offline}}
results = []
for cell in CELLS:
    name = "<cell %d>" % cell["index"]
    source = cell["source"]
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    record = {{"cell": cell["index"], "deploy": cell["deploy"], "changed": cell["changed"]}}
    start = time.time()
    print("\n===== %s =====" % name, flush=True)
    try:
        code = compile(source, name, "exec")
        signal.alarm(TIMEOUT)
        try:
            exec(code, namespace)
        finally:
            signal.alarm(0)
        record["status"] = "passed"
    except BaseException as e:  # noqa: B036 - SystemExit from a cell is a failure too
        frames = traceback.extract_tb(e.__traceback__)
        in_cell = [f for f in frames if f.filename == name]
        record.update(status="failed", type=type(e).__name__, module=type(e).__module__,
                      message=(str(e).strip().splitlines() or [""])[0][:400],
                      lines=len(str(e).strip().splitlines()), not_implemented=isinstance(e, NotImplementedError),
                      call=(in_cell[-1].line or "").strip() if in_cell else "",
                      raised_in="%s:%s" % (frames[-1].filename, frames[-1].lineno) if frames else "",
                      in_standin="_azureml_shim" in (frames[-1].filename if frames else ""))
        traceback.print_exc()
    record["seconds"] = round(time.time() - start, 2)
    results.append(record)
    with open(RESULTS, "w") as f:
        json.dump(results, f, indent=1)
# not a cell: let submitted runs finish so that the next notebook starts on an idle machine
for value in list(namespace.values()):
    if type(value).__module__.startswith("azureml") and hasattr(value, "wait_for_completion") \
            and hasattr(value, "get_status"):
        try:
            signal.alarm(TIMEOUT)
            value.wait_for_completion(show_output=False)
        except BaseException:
            pass
        finally:
            signal.alarm(0)
# not a cell: services a failed cell left running are stopped
try:
    from mltrain.endpoints import serving
    for name in serving.names():
        print("deleting service left running:", name)
        serving.delete_endpoint(name)
except ImportError:
    pass
'''


def extract(notebook: Path, probe: bool = False) -> list[dict]:
    """The notebook's code cells, magics handled, downloads pointed at local copies."""
    cells = []
    for index, cell in enumerate(c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"):
        source = "".join(cell["source"])
        original = source
        first = source.lstrip().split("\n", 1)
        if first[0].startswith("%%writefile"):
            target = first[0].split(None, 1)[1].strip()
            body = first[1] if len(first) > 1 else ""
            target_expr = re.sub(r"\$(\w+)", r"{\1}", target)
            source = (f"import os as _os\n_p = f{target_expr!r}\n_os.makedirs(_os.path.dirname(_p) or '.', exist_ok=True)\n"
                      f"open(_p, 'w').write({body!r})\nprint('Writing', _p)\n")
        elif first[0].startswith("%%"):
            cells.append({"index": index, "source": "", "skipped": f"cell magic {first[0].split()[0]}",
                          "deploy": False, "changed": True})
            continue
        else:
            source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
            source = source.replace("urllib.request.urlretrieve(", "_offline.urlretrieve(")
            source = source.replace("requests.get(", "_offline.requests_get(")
            if probe:
                for old, new in PROBE:
                    source = source.replace(old, new)
                for url in URLS:  # the local copy's path where a v1 call takes the URL
                    source = source.replace(url, str(local_copy(url)))
        if not source.strip() or all(l.strip().startswith("#") or not l.strip() for l in source.splitlines()):
            continue  # comment-only cells are not run (nothing to pass or fail)
        try:  # a cell that is only a string literal (commented-out code) is not run either
            import ast
            tree = ast.parse(source)
            if all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in tree.body):
                continue
        except SyntaxError:
            pass
        cells.append({"index": index, "source": source, "deploy": bool(DEPLOY.search(source)),
                      "changed": source != original})
    return cells


DATA = Path(tempfile.gettempdir()) / "aml-v1-notebooks-data"


def local_copy(url: str) -> Path:
    path = DATA / re.sub(r"[^\w.-]", "_", url.split("://", 1)[1])
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(URLS[url]())
    return path


def prepare(notebook: Path, root: Path) -> tuple[Path, Path, list[str], list[str]]:
    """A workspace folder for one notebook; returns (workspace, home, cluster names, notes)."""
    stem = notebook.stem
    ws = root / stem / "ws"
    home = root / stem / "home"
    shutil.copytree(notebook.parent, ws, ignore=shutil.ignore_patterns("*.ipynb"))
    home.mkdir(parents=True)
    (ws / "config.json").write_text(json.dumps(CONFIG))
    names = sorted(set(CLUSTER.findall(notebook.read_text().replace('\\"', '"'))))
    (ws / ".mltrain" / "compute").mkdir(parents=True)
    for name in names:
        (ws / ".mltrain" / "compute" / f"{name}.yaml").write_text("defaults: [local_schema, _self_]\n")
    data = DATA
    local = {url: str(local_copy(url)) for url in URLS}
        # the same URLs for Dataset.File.from_files / Tabular.from_delimited_files: a datastores.yaml prefix map
    mapping = {url.rsplit("/", 1)[0] + "/": str(data / re.sub(r"[^\w.-]", "_", url.split("://", 1)[1].rsplit("/", 1)[0])) + "/"
               for url in URLS}
    for url in URLS:
        folder = Path(mapping[url.rsplit("/", 1)[0] + "/"])
        folder.mkdir(exist_ok=True)
        shutil.copyfile(local[url], folder / url.rsplit("/", 1)[1])
    (ws / ".mltrain" / "datastores.yaml").write_text("".join(f"{k}: {v}\n" for k, v in mapping.items()))
    notes = []
    for script, (text, why) in STAND_INS.get(stem, {}).items():
        (ws / script).write_text(text)
        notes.append(f"{script} replaced by a synthetic stand-in (needs {why})")
    (ws / "_local.json").write_text(json.dumps(local))
    return ws, home, names, notes


def _rest_server(env: dict, home: Path) -> subprocess.Popen:
    """`mltrain ui --pipelines-only` for a notebook that posts to a published pipeline's endpoint, as a user
    of those notebooks keeps Azure's service (here: mltrain's REST server) answering; on a free port."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "mltrain", "ui", "--pipelines-only", "--pipelines-port",
                               str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline and not (home / "pipelines_rest.json").exists() and server.poll() is None:
        time.sleep(0.1)
    return server


def run_notebook(notebook: Path, root: Path, timeout: int, probe: bool = False) -> dict:
    ws, home, names, notes = prepare(notebook, root)
    cells = extract(notebook, probe)
    runnable = [c for c in cells if not c.get("skipped")]
    results = ws / "_results.json"
    (ws / "control.py").write_text(CONTROL.format(notebook=notebook.name, cells=json.dumps(runnable),
                                                  results=str(results), timeout=timeout,
                                                  local=(ws / "_local.json").read_text()))
    env = dict(os.environ, MLTRAIN_HOME=str(home), PYTHONUNBUFFERED="1")
    for variable, (value, why) in ENVIRONMENT.get(notebook.stem, {}).items():
        env[variable] = value
        notes.append(f"{variable}={value} set ({why})")
    start = time.time()
    rest = _rest_server(env, home) if any(".endpoint" in c["source"] for c in runnable) else None
    if rest is not None:
        notes.append("`mltrain ui --pipelines-only` serves the published pipelines' REST endpoints (Azure's service)")
    with open(ws / "_control.log", "w") as log:
        try:
            proc = subprocess.run([sys.executable, "control.py"], cwd=ws, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, timeout=timeout * 3 + 120)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        finally:
            if rest is not None:
                rest.terminate()
                rest.wait(timeout=30)
    outcome = json.loads(results.read_text()) if results.exists() else []
    return {"notebook": notebook.relative_to(notebook.parents[2]).as_posix() if len(notebook.parents) > 2
            else notebook.name, "stem": notebook.stem, "clusters": names, "notes": notes, "rc": rc,
            "seconds": round(time.time() - start, 1), "cells": outcome,
            "skipped": [c for c in cells if c.get("skipped")], "workspace": str(ws)}


def classify(record: dict) -> None:
    """passed / refused (deployment, one-line NotImplementedError, and what only failed for want of it) /
    failed; a NameError after an earlier failure is a cascade, not a new finding."""
    refused = False
    failed = False
    for cell in record["cells"]:
        if cell["status"] != "failed":
            continue
        if cell["deploy"] and cell.get("not_implemented") and cell["lines"] == 1:
            cell["status"] = "refused"
            refused = True
        elif cell["type"] == "NameError" and (refused or failed):
            cell["status"] = "refused (follow-on)" if refused and not failed else "cascade"
        else:
            failed = True


def row(record: dict) -> str:
    cells = record["cells"]
    passed = sum(c["status"] == "passed" for c in cells)
    refused = sum(c["status"].startswith("refused") for c in cells)
    failures = [c for c in cells if c["status"] == "failed"]
    cascades = sum(c["status"] == "cascade" for c in cells)
    if failures:
        f = failures[0]
        msg = f["message"].replace("|", "\\|")
        call = f["call"].replace("|", "\\|")
        result = f"cell {f['cell']}: `{f['type']}`: {msg} — call `{call}`"
        more = len(failures) - 1
        if more:
            result += f" (+{more} later failure{'s' if more > 1 else ''})"
        if cascades:
            result += f" (+{cascades} NameError cascade{'s' if cascades > 1 else ''})"
    else:
        result = "all cells pass"
    if refused:
        result += f"; {refused} deployment cell{'s' if refused > 1 else ''} refused in one line"
    if record["rc"] == "timeout":
        result += "; control.py timed out"
    if record["notes"]:
        result += "; " + "; ".join(record["notes"])
    if record["skipped"]:
        result += "; skipped " + ", ".join(f"cell {c['index']} ({c['skipped']})" for c in record["skipped"])
    name = record["notebook"].rsplit("/", 1)[-1].removesuffix(".ipynb")
    return f"| {name} | {len(cells)} | {passed} | {result} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="folder holding the exported notebook folders")
    parser.add_argument("--only", action="append", help="run notebooks whose path contains this (repeatable)")
    parser.add_argument("--cell-timeout", type=int, default=300)
    parser.add_argument("--md", type=Path, default=None, help="write the table here")
    parser.add_argument("--json", type=Path, default=None, help="write every cell's outcome here")
    parser.add_argument("--probe", action="store_true", help="apply PROBE's workarounds to get past known failures")
    parser.add_argument("--keep", type=Path, default=None, help="workspaces here instead of a temp folder")
    args = parser.parse_args()
    notebooks = sorted(p for folder in FOLDERS for p in (args.root / folder).rglob("*.ipynb")
                       if "notebook_runner" not in p.parts)  # notebook_runner/ holds a step's input notebook
    if args.only:
        notebooks = [p for p in notebooks if any(s in str(p) for s in args.only)]
    work = args.keep or Path(tempfile.mkdtemp(prefix="aml-v1-notebooks-"))
    work.mkdir(parents=True, exist_ok=True)
    records = []
    for notebook in notebooks:
        print(f"== {notebook.name}", file=sys.stderr, flush=True)
        record = run_notebook(notebook, work, args.cell_timeout, args.probe)
        classify(record)
        records.append(record)
        print(row(record), flush=True)
    lines = ["| notebook | cells run | passed | result / first failure |", "|---|---|---|---|"]
    lines += [row(r) for r in records]
    table = "\n".join(lines) + "\n"
    print(table)
    print(distinct(records))
    if args.md:
        title = ("## With --probe: workarounds for the first failures (PROBE in the runner), to reach later cells"
                 if args.probe else "## Azure's cells as published (downloads read local copies, magics dropped)")
        text = f"{title}\n\nRun {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, " \
               f"{sum(len(r['cells']) for r in records)} cells in {len(records)} notebooks, " \
               f"{sum(r['seconds'] for r in records):.0f} s.\n\n{table}\n{distinct(records)}\n"
        if args.probe and args.md.exists():
            text = args.md.read_text() + "\n" + text
        elif not args.probe:
            text = HEADER + "\n" + text
        args.md.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))


HEADER = """# Azure ML SDK v1 notebooks on mltrain's stand-ins

Azure's own notebooks (github.com/Azure/MachineLearningNotebooks, `how-to-use-azureml/ml-frameworks/pytorch/`
and `how-to-use-azureml/machine-learning-pipelines/`), each notebook's code cells run in order as one
`control.py` in a fresh workspace folder (Azure's `config.json`, `.mltrain/compute/NAME.yaml` for the
notebook's cluster names, `MLTRAIN_HOME` in a temp folder), by `benchmarks/azure_v1_notebooks.py`.
A failing cell does not stop the run (as "Run All" that goes on after errors); a later `NameError` for a
name the failed cell should have defined is counted as a cascade, not a new failure. "passed" counts cells
that ran without an exception. Deployment cells (`Model.deploy`, `service.run`, ...) run on mltrain's endpoint
engine since 2026-11-28 (before, they were refused in one line).
"""


def distinct(records: list[dict]) -> str:
    """Every distinct failure (not cascades), most notebooks first."""
    groups: dict[tuple, dict] = {}
    for record in records:
        for cell in record["cells"]:
            if cell["status"] not in ("failed", "refused"):
                continue
            message = re.sub(r"/\S*/(ws|home)/\S*", "<workspace path>", cell["message"])
            message = re.sub(r" \(/\S+\.py\)", "", message)
            message = re.sub(r"\d{8}_\d{6}_[0-9a-f]{6}", "<id>", message)
            key = (cell["type"], message)
            g = groups.setdefault(key, {"notebooks": [], "call": cell["call"], "where": cell["raised_in"],
                                        "status": cell["status"]})
            stem = record["stem"]
            if stem not in g["notebooks"]:
                g["notebooks"].append(stem)
    out = ["| # | notebooks | exception | first call | raised in |", "|---|---|---|---|---|"]
    for i, ((kind, message), g) in enumerate(sorted(groups.items(), key=lambda kv: -len(kv[1]["notebooks"])), 1):
        where = re.sub(r".*/_azureml_shim/", "", g["where"])
        out.append(f"| {i} | {len(g['notebooks'])} | `{kind}`: {message.replace('|', chr(92) + '|')}"
                   f"{' (expected refusal)' if g['status'] == 'refused' else ''} | "
                   f"`{g['call'][:120].replace('|', chr(92) + '|')}` | {where} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
