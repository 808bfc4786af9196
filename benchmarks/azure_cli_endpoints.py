"""Conformance over every online endpoint and deployment YAML under `cli/endpoints/online/` of Azure's examples
(github.com/Azure/azureml-examples), from a fetched copy outside this repository, as benchmarks/azure_cli_jobs.py
does for job files.

An endpoint file is one whose `$schema` is managedOnlineEndpoint or kubernetesOnlineEndpoint, a deployment file one
whose `$schema` is managedOnlineDeployment or kubernetesOnlineDeployment. Each folder that holds deployment files is
one example, run in a fresh MLTRAIN_HOME (its `servers/` and `envs/` are symbolic links to one shared folder, as
benchmarks/azure_sdk_v2_notebooks.py shares them; pip's own cache, ~/.cache/pip, is shared as it is):

1. what the example's shell script (`cli/deploy-*.sh`) does before `az ml`: its `{{VAR}}` placeholders filled in
   (in a copy of the folder tree), and the models it registers with `az ml model create` registered with
   `mltrain models register`;
2. `mltrain endpoints create NAME --file ENDPOINT.yml` (the folder's endpoint file, or its parent's; the scripts
   pass `--name`), or `mltrain endpoints create NAME` where the example has none;
3. `mltrain endpoints deploy NAME --file DEPLOYMENT.yml` for each deployment file (`--all-traffic` for
   the first one deployed; the scripts pass `--endpoint-name`);
4. `mltrain endpoints invoke NAME --deployment D --request-file F` with the example's sample request, where one is
   obvious (sample-request.json / sample_request.json beside the file, or beside its model or code folder);
5. `mltrain endpoints delete NAME`; then no `mltrain.endpoints.serve` process of that home may be left (any is
   killed and recorded as a defect).

Usage: .venv/bin/python benchmarks/azure_cli_endpoints.py /tmp/azep [--extract] [--timeout 240] [--only FOLDER]
           [--results /tmp/azep-results.json] [--out FILE] [--table-only]
       (/tmp/azep holds cli/endpoints/online of a fetched Azure/azureml-examples; with --extract it is written
       there first from the bare git directory of --mirror, skipping blobs absent from the snapshot; with --only,
       the other examples' rows are kept from --results)
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / ".venv" / "bin"
ONLINE = "cli/endpoints/online"
MIRROR = "/work/.mirror/Azure+azureml-examples/repo"
ENDPOINT_SCHEMAS = ("managedOnlineEndpoint", "kubernetesOnlineEndpoint")
DEPLOYMENT_SCHEMAS = ("managedOnlineDeployment", "kubernetesOnlineDeployment")
#: The lock a reinstall of mltrain holds (as benchmarks/azure_cli_jobs.py): no command runs while it is absent.
INSTALL_LOCK = "/tmp/mltrain-install.lock"

#: What each example's `cli/deploy-*.sh` puts in place of a placeholder (the rest: `{{VAR}}` -> `var`, as a name).
PLACEHOLDERS = {"{{MODEL_VERSION}}": "1", "<SCORING_SCRIPT>": "single-file-to-file-score.py",
                "<CODE_DIR>": "code-decorated", "{{ACR_NAME}}": "myacr", "{{acr_name}}": "myacr",
                "{{model_name}}": "sklearn-diabetes", "{{deployment_name}}": "sklearn-diabetes",
                "{{environment_name}}": "sklearn-diabetes-env"}
#: `az ml model create` of the scripts (and of the examples' model.yml): folder -> [(name, path from the folder)].
MODELS: Dict[str, List[Tuple[str, str]]] = {
    "managed/sample": [("my-model", "../../model-1/model"), ("my-model", "../../model-2/model")],
    "managed/inference-schema": [("azureml-infschema", "models")],
    "managed/minimal/single-model-registered": [("minimalregistered", "../../../model-1/model")],
    "deploy-with-packages/custom-model": [("sklearn-regression", "model")],
    "deploy-with-packages/mlflow-model": [("heart-classifier-mlflow", "model")],
}


def extract(dest: Path, mirror: str) -> int:
    """cli/endpoints/online of the snapshot's HEAD into dest, less the blobs the snapshot lacks."""
    git = ["git", f"--git-dir={mirror}"]
    tree = subprocess.run([*git, "ls-tree", "-r", "HEAD", ONLINE], capture_output=True, text=True, check=True).stdout
    rows = [line.split("\t", 1) for line in tree.splitlines()]
    check = subprocess.run([*git, "cat-file", "--batch-check"], input="\n".join(r[0].split()[2] for r in rows) + "\n",
                           capture_output=True, text=True, check=True).stdout.splitlines()
    present = [path for (_, path), state in zip(rows, check) if not state.endswith("missing")]
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.Popen([*git, "archive", "HEAD", "--", *present], stdout=subprocess.PIPE,
                               env=dict(os.environ, GIT_LITERAL_PATHSPECS="1"), stderr=subprocess.DEVNULL)
    subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
    archive.wait()
    return len(rows) - len(present)


def schema(path: Path) -> str:
    head = path.read_text(errors="replace")[:600]
    for s in ENDPOINT_SCHEMAS + DEPLOYMENT_SCHEMAS:
        if s in head:
            return s
    return ""


def examples(online: Path) -> List[Tuple[Path, List[Path], List[Path]]]:
    """(folder, its endpoint files, its deployment files) for each folder with a deployment file; a folder with no
    endpoint file uses its parent's. Endpoint files with no deployment anywhere below them are examples alone."""
    files = sorted(p for p in online.rglob("*") if p.suffix in (".yml", ".yaml") and schema(p))
    folders: Dict[Path, Tuple[List[Path], List[Path]]] = {}
    for path in files:
        ends, deps = folders.setdefault(path.parent, ([], []))
        (ends if "Endpoint" in schema(path) else deps).append(path)
    out = []
    used: set = set()
    for folder, (ends, deps) in sorted(folders.items()):
        if not deps:
            continue
        if not ends and folder.parent in folders:
            ends = folders[folder.parent][0]
        used.update(ends)
        out.append((folder, ends, deps))
    for folder, (ends, _deps) in sorted(folders.items()):
        for end in ends:
            if end not in used:
                out.append((folder, [end], []))
    return out


def fill(text: str) -> str:
    """The placeholders, as the example's script fills them."""
    for key, value in PLACEHOLDERS.items():
        text = text.replace(key, value)
    text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: m.group(1).lower().replace("_", "-"), text)
    return re.sub(r"<([A-Z][A-Z_]+)>", lambda m: m.group(1).lower().replace("_", "-"), text)


def request_file(dep: Path) -> Optional[Path]:
    """The sample request beside the file (one whose name shares a word with the file's if there are several),
    else beside the model or code folder the file names."""
    def pick(folder: Path) -> Optional[Path]:
        found = sorted(p for p in folder.glob("*.json") if re.match(r"sample[-_]request", p.name))
        found += sorted(folder.glob("sample-inputs/*.json"))
        words = set(re.split(r"[-_.]", dep.stem))
        named = [p for p in found if words & set(re.split(r"[-_.]", p.stem)) - {"sample", "request", "json"}]
        return (named or found[:1] or [None])[0] if len(found) != 1 else found[0]
    own = pick(dep.parent)
    if own:
        return own
    for m in re.finditer(r"^\s*(?:path|code):\s*(\S+)", dep.read_text(), re.M):
        target = (dep.parent / m.group(1).strip("'\"")).resolve()
        for folder in (target, target.parent):
            if folder.is_dir() and folder != dep.parent.resolve():
                got = pick(folder)
                if got:
                    return got
    return None


def mltrain(args: List[str], cwd: Path, env: Dict[str, str], timeout: float) -> Tuple[int, str, float]:
    """One mltrain command: its exit code (124: stopped at the timeout), its console and its wall seconds."""
    with open(INSTALL_LOCK, "a") as lock, contextlib.ExitStack() as stack:
        fcntl.flock(lock, fcntl.LOCK_SH)
        stack.callback(fcntl.flock, lock, fcntl.LOCK_UN)
        start = time.perf_counter()
        proc = subprocess.Popen([str(BIN / "mltrain"), *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                out, _ = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
            rc = 124
        return rc, out, time.perf_counter() - start


def one_line(out: str) -> str:
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("mltrain: error:") or "Error" in line.split(":")[0]]
    return " ".join((errors[-1:] or lines[-1:] or ["?"])[0].split())[:400]


def servers(home: Path) -> List[int]:
    """The pids of `mltrain.endpoints.serve` processes whose environment names this home."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            if b"mltrain.endpoints.serve" not in cmd:
                continue
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if f"MLTRAIN_HOME={home}".encode() in environ.split(b"\0") or str(home).encode() in cmd:
            pids.append(int(proc.name))
    return pids


def category(text: str) -> str:
    """Which reason a refusal or failure is (the harness's own reading of its one line)."""
    t = text.lower()
    if "still running after" in t:
        return "timeout"
    if "triton" in t:
        return "needs Triton"
    if any(s in t for s in ("container runtime", "docker", "inference_config", "custom container")):
        return "needs Docker/custom container"
    if any(s in t for s in ("vault", "identity", "credential", "managedidentity", "storage_place_holder")):
        return "needs Azure identity/Key Vault"
    if any(s in t for s in ("resolutionimpossible", "no matching distribution", "could not find a version",
                            "environment build", "building environment", "pip install")):
        return "environment build failure"
    if any(s in t for s in ("name or service not known", "temporary failure in name resolution", "urlopen",
                            "download", "connection")):
        return "network download"
    if any(s in t for s in ("not registered", "-pkg", "package")):
        return "needs an Azure-only asset"
    return "other (read the line)"


def run_example(folder: Path, ends: List[Path], deps: List[Path], online: Path, work: Path, shared: Path,
                timeout: float) -> List[Dict[str, object]]:
    """Steps 1 to 5 for one example; one row per file."""
    rel = folder.relative_to(online).as_posix()
    base = work / re.sub(r"\W", "_", rel)
    tree = base / "online"
    shutil.copytree(online, tree, symlinks=True)
    for path in tree.rglob("*"):
        if path.suffix in (".yml", ".yaml") and path.is_file():
            text = path.read_text(errors="replace")
            if fill(text) != text:
                path.write_text(fill(text))
    home = base / "home"
    home.mkdir()
    for name in ("servers", "envs"):
        (shared / name).mkdir(parents=True, exist_ok=True)
        (home / name).symlink_to(shared / name)
    env = dict(os.environ, MLTRAIN_HOME=str(home), PYTHONUNBUFFERED="1")
    here = tree / rel
    name = "e-" + re.sub(r"[^a-z0-9]+", "-", rel.lower()).strip("-")[-28:].strip("-")  # Azure's 3 to 32 characters
    rows: List[Dict[str, object]] = []
    for model, path in MODELS.get(rel, []):
        rc, out, _ = mltrain(["models", "register", model, "--path", path], here, env, 120)
        if rc:
            print(f"  setup: models register {model}: {one_line(out)}", file=sys.stderr)

    def row(path: Path, outcome: str, why: str, s: float, **more: object) -> Dict[str, object]:
        r = {"file": path.relative_to(online).as_posix() if online in path.parents else path.as_posix(),
             "outcome": outcome, "why": why, "s": round(s, 1), **more}
        if outcome not in ("created", "deployed", "invoked", "deleted"):
            r["category"] = category(why)
        rows.append(r)
        print(f"  {outcome:10} {s:6.1f}s {r['file']}  {why[:200]}", file=sys.stderr, flush=True)
        return r

    created = False
    if ends:
        end = tree / ends[0].relative_to(online)
        rc, out, s = mltrain(["endpoints", "create", name, "--file", end.name], end.parent, env, 120)
        created = rc == 0
        row(ends[0], "created" if created else ("refused" if rc == 2 else "failed"), "" if created else one_line(out), s)
        for other in ends[1:]:  # a second endpoint file of the folder: created too, then deleted
            o = tree / other.relative_to(online)
            rc2, out2, s2 = mltrain(["endpoints", "create", name + "-2", "--file", o.name], o.parent, env, 120)
            row(other, "created" if rc2 == 0 else ("refused" if rc2 == 2 else "failed"),
                "" if rc2 == 0 else one_line(out2), s2)
            if rc2 == 0:
                mltrain(["endpoints", "delete", name + "-2"], here, env, 60)
    if not created:  # as the scripts' `az ml online-endpoint create --name` with no file
        rc, out, _ = mltrain(["endpoints", "create", name], here, env, 120)
        created = rc == 0
    first = True
    for dep in deps:
        d = tree / dep.relative_to(online)
        args = ["endpoints", "deploy", name, "--file", d.name] + (["--all-traffic"] if first else [])
        rc, out, s = mltrain(args, d.parent, env, timeout)
        if rc == 124:
            building = re.findall(r"building environment (\S+)", out)
            row(dep, "timeout", f"still running after {timeout:.0f} s (stopped by this harness"
                + (f"; it was building environment {building[-1]}" if building else "") + ")", s)
            continue
        if rc != 0:  # a server that did not start is a failure (mltrain exits 2 for it too), not a refusal
            line = one_line(out)
            row(dep, "refused" if rc == 2 and not re.search(r"deployment \S+ of endpoint \S+ failed", line)
                else "failed", line, s)
            continue
        first = False
        dep_name = re.search(r"^name:\s*[\"']?([\w-]+)", d.read_text(), re.M)
        request = request_file(d)
        if request is None:
            row(dep, "deployed", "no obvious sample request", s)
            continue
        rc, answer, s2 = mltrain(["endpoints", "invoke", name, "--request-file", str(request)]
                                 + (["--deployment", dep_name.group(1)] if dep_name else []), d.parent, env, 120)
        req = request.relative_to(tree).as_posix()
        if rc == 0:
            row(dep, "invoked", f"{req}: {' '.join(answer.split())[:120]}", s + s2)
        else:
            row(dep, "deployed", f"invoke with {req} failed: {one_line(answer)}", s + s2, invoke_failed=True)
    defects = []
    if created:
        rc, out, _ = mltrain(["endpoints", "delete", name], here, env, 120)
        if rc:
            defects.append(f"delete failed: {one_line(out)}")
    rc, out, _ = mltrain(["endpoints", "list", "--json"], here, env, 60)
    for left in json.loads(out) if rc == 0 and out.strip().startswith("[") else []:
        mltrain(["endpoints", "delete", left["name"]], here, env, 120)
    time.sleep(1)
    stray = servers(home)
    for pid in stray:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if stray:
        defects.append(f"{len(stray)} mltrain.endpoints.serve process(es) left after delete, killed: {stray}")
    for r in rows:
        r["example"] = rel
    if defects:
        rows.append({"file": rel + "/ (after delete)", "outcome": "defect", "why": "; ".join(defects), "s": 0.0,
                     "category": "mltrain defect", "example": rel})
    shutil.rmtree(base, ignore_errors=True)
    return rows


#: Why a file did not serve, read from its line, the example's files and mltrain's code (filled in by hand
#: after the run; the category column is the harness's reading of the line).
CONTAINER = "needs Docker/custom container"
CAUSES: Dict[str, Tuple[str, str]] = {
    "custom-container/minimal/multimodel/minimal-multimodel-deployment.yml":
        (CONTAINER, "the script builds the folder's Dockerfile into the workspace's registry and serves from it"),
    "custom-container/minimal/single-model/conda-in-dockerfile/minimal-single-model-conda-in-dockerfile-deployment.yml":
        (CONTAINER, "an image built by the script from the folder's Dockerfile (conda inside it)"),
    "custom-container/minimal/single-model/pip-in-dockerfile/minimal-single-model-pip-in-dockerfile-deployment.yml":
        (CONTAINER, "an image built by the script from the folder's Dockerfile (pip inside it)"),
    "custom-container/mlflow/multideployment-scikit/mlflow-deployment.yml":
        (CONTAINER, "an MLflow image built from mlflow.dockerfile; its model folder is copied in from ncd/ by the "
                    "script, which this harness does not do"),
    "custom-container/r/multimodel-plumber/r-deployment.yml":
        (CONTAINER, "an R plumber server in an image built from r.dockerfile; not a Python scoring script"),
    "custom-container/tfserving/half-plus-two/tfserving-deployment.yml":
        (CONTAINER, "TensorFlow Serving's image; its model is also a download (`wget https://aka.ms/half_plus_two-model`)"),
    "custom-container/tfserving/half-plus-two-integrated/half-plus-two-integrated-deployment.yml":
        (CONTAINER, "TensorFlow Serving with the model built into the image"),
    "custom-container/torchserve/densenet/torchserve-deployment.yml":
        (CONTAINER, "TorchServe's image; its model archive is also a download (`wget https://aka.ms/torchserve-densenet161`)"),
    "custom-container/triton/single-model/triton-cc-deployment.yml":
        ("needs Triton", "NVIDIA Triton's own image as a custom container (and the snapshot lacks its model.onnx)"),
    "triton/single-model/create-managed-deployment.yaml":
        ("needs Triton", "`type: triton_model` with no scoring script: Azure serves it with Triton in its image. The "
                         "snapshot lacks models/model_1/1/model.onnx, so the folder is absent here"),
    "deploy-with-packages/custom-model/deployment.yml":
        ("needs an Azure-only asset", "the environment is a model package (`az ml model package`, package-moe.yml), "
                                      "an image Azure builds; mltrain has no model packages"),
    "deploy-with-packages/mlflow-model/deployment.yml":
        ("needs an Azure-only asset", "the environment is a model package Azure builds (package.yml)"),
    "deploy-with-packages/custom-model/model-deployment.yml":
        ("needs a registered environment", "the script's `az ml environment create -f environment/sklearn-regression-env.yml`; "
                                           "mltrain has no environment registry (names are mapped in .mltrain/environment/)"),
    "managed/sample/blue-deployment-with-registered-assets.yml":
        ("needs a registered environment", "`azureml:my-env:1`, which the script makes with `az ml environment create`; "
                                           "the models my-model:1 and :2 were registered by this harness"),
    "managed/sample/green-deployment-with-registered-assets.yml":
        ("needs a registered environment", "as blue's: `azureml:my-env:1`"),
    "managed/keyvault/keyvault-deployment.yml":
        ("needs Azure identity/Key Vault", "Azure's inference server resolves `KV_SECRET_*` from the vault with the "
                                           "deployment's managed identity; no vault (and no DNS) here"),
    "managed/managed-identities/2-sai-deployment.yml":
        ("needs Azure identity/Key Vault", "score_managedidentity.py's init() adds to `MSI_ENDPOINT`, which only "
                                           "Azure's managed identity sets"),
    "managed/managed-identities/2-uai-deployment.yml":
        ("needs Azure identity/Key Vault", "as the system-assigned one: `MSI_ENDPOINT` is unset outside Azure"),
    "managed/inference-schema/deployment-numpy.yml": ("environment build failure (scikit-learn=1.2.2)", "SKLEARN"),
    "managed/inference-schema/deployment-pandas.yml": ("environment build failure (scikit-learn=1.2.2)", "SKLEARN"),
    "managed/inference-schema/deployment-standard.yml": ("environment build failure (scikit-learn=1.2.2)", "SKLEARN"),
    "managed/vnet/mlflow/blue-deployment-vnet.yml":
        (CONTAINER, "an image the vnet setup builds into the workspace's registry (and a network-isolated workspace)"),
    "managed/vnet/sample/blue-deployment-vnet.yml":
        (CONTAINER, "an image the vnet setup builds into the workspace's registry (and a network-isolated workspace)"),
    "ncd/lightgbm-deployment.yaml": ("mltrain limitation (engine)", "NCD"),
    "deploy-with-packages/mlflow-model/model-deployment.yml": ("mltrain limitation (engine)", "NCD"),
    "ncd/sklearn-deployment-with-script.yaml":
        ("the example's own code", "its score.py imports `infer_and_parse_json_input` from mlflow.pyfunc.scoring_server, "
                                   "gone from MLflow 3 (now `infer_and_parse_data`); its conda file asks for `mlflow` "
                                   "unpinned, which Azure also resolves to MLflow 3 today"),
    "managed/binary-payloads/binary-payloads-deployment.yml":
        ("not invoked", "the script posts input.jpg as multipart form data (`curl -F`); `mltrain endpoints invoke` "
                        "sends a body as it is, so no invoke was tried"),
    "kubernetes/kubernetes-endpoint.yml":
        ("-", "`auth_mode: Key` (camel case, as Azure's loader takes it): refused in a first pass at 932b7b9, taken since 0f0a845"),
}
_SKLEARN = ("env.yml pins scikit-learn=1.2.2 (and python=3.10) with numpy unpinned; pip installs scikit-learn 1.2.2's "
            "wheel (whose metadata allows any numpy >= 1.17.3) into the environment, and numpy is not installed there: the "
            "build said `conda packages installed from PyPI, same versions: numpy, pandas`, and the server imports the "
            "host venv's numpy 2.4.6, so sklearn's compiled modules fail to load (numpy ABI: `numpy.dtype size "
            "changed`). conda-forge's scikit-learn 1.2.2 builds require numpy<2, which a conda solve would have kept")
_NCD = ("an MLflow model with no environment (no-code deployment): Azure builds the model's own conda.yaml "
        "(lightgbm / xgboost in it); mltrain serves it in its own interpreter, which lacks them (mltrain/endpoints/"
        "serving.py `_environment`: no environment -> sys.executable)")
CAUSES.update({k: (c, {"SKLEARN": _SKLEARN, "NCD": _NCD}.get(w, w)) for k, (c, w) in CAUSES.items()})


def render(rows: List[Dict[str, object]]) -> str:
    head = "| file (`cli/endpoints/online/`) | outcome | category | s | line / answer |\n|---|---|---|---|---|\n"
    body = ""
    for r in rows:
        why = str(r["why"])
        cat = str(r.get("category", "-")) if r["outcome"] not in ("invoked", "created") else "-"
        if r.get("invoke_failed"):
            cat = "invoke failed"
        if str(r["file"]) in CAUSES:
            cat, cause = CAUSES[str(r["file"])]
            r["category"] = cat
            why += f" **cause:** {cause}"
        body += f"| `{r['file']}` | {r['outcome']} | {cat} | {float(r['s']):.1f} | " + \
            " ".join(why.split()).replace("|", "/") + " |\n"
    files = [r for r in rows if r["outcome"] != "defect"]
    counts: Dict[str, int] = {}
    kinds: Dict[str, int] = {}
    for r in files:
        counts[str(r["outcome"])] = counts.get(str(r["outcome"]), 0) + 1
        if "category" in r and r["outcome"] not in ("created", "invoked"):
            kinds[str(r["category"])] = kinds.get(str(r["category"]), 0) + 1
    total = f"\n{len(files)} files: " + ", ".join(f"{n} {o}" for o, n in sorted(counts.items(), key=lambda x: -x[1])) \
        + ".\n\n" + "".join(f"- {k}: {n}\n" for k, n in sorted(kinds.items(), key=lambda x: -x[1]))
    defects = [r for r in rows if r["outcome"] == "defect"]
    total += f"\nServers left running after delete: {len(defects)} example(s).\n"
    return head + body + total


COMMIT = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", type=Path, help="a folder holding cli/endpoints/online of Azure's examples")
    ap.add_argument("--extract", action="store_true", help="write it there first from --mirror")
    ap.add_argument("--mirror", default=MIRROR)
    ap.add_argument("--only", default="", help="only examples whose folder contains this")
    ap.add_argument("--timeout", type=float, default=240, help="seconds one deploy may take before it is stopped")
    ap.add_argument("--results", type=Path, default=Path("/tmp/azep-results.json"))
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here (the prose above is kept)")
    ap.add_argument("--table-only", action="store_true", help="run nothing: the table of the rows in --results")
    a = ap.parse_args()
    if a.table_only:
        a.only = "\0"  # no example matches: every row is kept and sorted
    if a.extract:
        print(f"extracted; {extract(a.root, a.mirror)} blob(s) absent from the snapshot", file=sys.stderr)
    online = (a.root / ONLINE).resolve()
    work = Path(tempfile.mkdtemp(prefix="azep-work-"))
    rows: List[Dict[str, object]] = []
    if a.only and a.results.exists():  # the other examples' rows are kept from the earlier run
        rows = [r for r in json.loads(a.results.read_text()) if a.only not in str(r.get("example", ""))]
    try:
        for folder, ends, deps in examples(online):
            rel = folder.relative_to(online).as_posix()
            if a.only not in rel:
                continue
            print(f"{rel}: {len(ends)} endpoint file(s), {len(deps)} deployment file(s)", file=sys.stderr, flush=True)
            got = run_example(folder, ends, deps, online, work, work / "_shared", a.timeout)
            for r in got:
                r["commit"] = COMMIT
            rows += got
            a.results.write_text(json.dumps(rows, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    order = {e: i for i, e in enumerate(f.relative_to(online).as_posix() for f, _, _ in examples(online))}
    rows.sort(key=lambda r: order.get(str(r.get("example", "")), len(order)))  # stable: each example's own order
    a.results.write_text(json.dumps(rows, indent=1))
    table = render(rows)
    if a.out:
        prose = a.out.read_text().split("| file (`cli/endpoints/online/`)")[0] if a.out.exists() else ""
        a.out.write_text(prose + table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
