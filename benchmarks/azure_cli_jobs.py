"""Conformance over every job file under `cli/jobs/` of Azure's examples (github.com/Azure/azureml-examples),
from a fetched copy outside this repository: each file is loaded by Azure's own offline loader
(`azure.ai.ml.load_job`, a test dependency, imported here only) and run with `mltrain job create --file F
--dry-run` (and, with `--live`, for real where the dry run passed). Writes a markdown table: each file,
Azure's verdict, mltrain's (ran / refused with its one line / failed) and seconds.

The copy gets the `.mltrain/` folder of benchmarks/azure_examples.py (cpu-cluster and gpu-cluster on this
machine, the datastore and web URIs mapped to local copies), plus the other compute names the examples use
and the data the wider folders read that has a local copy in the examples (`cli/jobs/spark/data/titanic.csv`
for the workspace's `data/titanic.csv` and 4c_web_url_input's Titanic.csv). Data with no copy here (CIFAR-10,
the pets images, NYC taxi in Azure's open datasets) stays unmapped: refused in one line naming the file to add.

Usage: .venv/bin/python benchmarks/azure_cli_jobs.py /tmp/azex [--live] [--timeout 240] [--out FILE]
       (where /tmp/azex holds cli/jobs and cli/assets of a fetched Azure/azureml-examples)
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from azure_examples import run as run_one  # noqa: E402  (the basics runner's process handling)
from azure_examples import set_up  # noqa: E402  (and its mapping of computes, datastores and web files)

JOB_SCHEMAS = ("commandJob", "sweepJob", "pipelineJob", "autoMLJob", "sparkJob", "parallelJob")
#: Compute names the examples use besides cpu-cluster and gpu-cluster: all this machine.
MORE_COMPUTES = ("cpu-cluster-lg", "cpucluster", "gpu-v100-cluster", "gpu-v100-1GPU-cluster")
Row = Tuple[str, str, str, str, float]


def set_up_all(root: Path, compute: str) -> None:
    set_up(root, compute)
    conf = root / ".mltrain"
    schema = "slurm_schema" if compute == "slurm" else "local_schema"
    for name in MORE_COMPUTES:
        (conf / "compute" / f"{name}.yaml").write_text(f"defaults: [{schema}, _self_]\n")
    data = root / "local-data"
    (data / "data").mkdir(parents=True, exist_ok=True)
    titanic = root / "cli/jobs/spark/data/titanic.csv"
    if titanic.exists() and not (data / "data" / "titanic.csv").exists():
        (data / "data" / "titanic.csv").symlink_to(titanic)
    (data / "data" / "wrangled").mkdir(exist_ok=True)
    (data / "dprep").mkdir(exist_ok=True)  # 4c_web_url_input's Titanic.csv: the same file as spark/data's
    if titanic.exists() and not (data / "dprep" / "Titanic.csv").exists():
        (data / "dprep" / "Titanic.csv").symlink_to(titanic)
    stores = (conf / "datastores.yaml").read_text()
    for line in ("azureml://datastores/workspaceblobstore/paths/data/: local-data/data\n",
                 "https://dprepdata.blob.core.windows.net/demo/: local-data/dprep\n"):
        if line not in stores:  # longest prefix wins, so its place in the file does not matter
            stores += line
    (conf / "datastores.yaml").write_text(stores)


#: The lock a reinstall of mltrain holds (the development tree reinstalls under it); shared here, so that no
#: example runs while its console script is briefly absent.
INSTALL_LOCK = "/tmp/mltrain-install.lock"


def run(path: Path, root: Path, extra: List[str], timeout: float) -> Tuple[str, str, float]:
    with open(INSTALL_LOCK, "a") as lock, contextlib.ExitStack() as stack:
        fcntl.flock(lock, fcntl.LOCK_SH)
        stack.callback(fcntl.flock, lock, fcntl.LOCK_UN)
        return run_one(path, root, extra, timeout)


def job_files(root: Path) -> Iterator[Path]:
    for path in sorted((root / "cli/jobs").rglob("*.y*ml")):
        head = path.read_text(errors="replace")[:400]
        if any(s in head for s in JOB_SCHEMAS):
            yield path


def azure_verdict(path: Path) -> str:
    """Azure's own loader on the file: `loads`, or its first line of complaint."""
    from azure.ai.ml import load_job

    cwd = os.getcwd()
    try:
        os.chdir(path.parent)
        load_job(str(path))
        return "loads"
    except Exception as exc:  # noqa: BLE001 (any complaint of Azure's loader is its verdict)
        first = " ".join(str(exc).split())[:160]
        return f"rejects: {type(exc).__name__}: {first}"
    finally:
        os.chdir(cwd)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", type=Path)
    ap.add_argument("--compute", default="local", choices=("local", "slurm"))
    ap.add_argument("--live", action="store_true", help="also run each file whose dry run passed")
    ap.add_argument("--only", default="", help="only files whose path contains this")
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--runs", default="/tmp/azex-runs", help="run.root for the example runs")
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    a = ap.parse_args()
    root = a.root.resolve()
    set_up_all(root, a.compute)
    extra = [f"run.root={a.runs}"]
    if a.compute == "slurm":
        extra += ["compute=slurm", "compute.poll_s=0.3"]
    rows: List[Row] = []
    for path in job_files(root):
        rel = str(path.relative_to(root / "cli/jobs"))
        if a.only not in rel:
            continue
        azure = azure_verdict(path)
        status, why, took = run(path, root, ["--dry-run", *extra], a.timeout)
        status = {"passed": "ran"}.get(status, status)
        live = ""
        if a.live and status == "ran":
            outcome, why_live, took = run(path, root, extra, a.timeout)
            live, why = outcome, why_live or why
        rows.append((rel, azure, status if not a.live else f"{status} / {live or '-'}", why, took))
        print(f"{status:8} {live:8} {took:6.1f}s  {rel}  [{azure[:40]}] {why}", file=sys.stderr, flush=True)
    table = render(rows, a)
    if a.out:
        a.out.write_text(table)
    print(table)
    return 0


def reason(azure: str, status: str, why: str) -> str:
    """Which of issue 38's reasons a refusal is (anything else is a defect to fix)."""
    if status != "refused":
        return status
    if "run only in Azure ML" in why:
        return "refused: Azure-only type"
    if azure != "loads":
        return "refused: Azure rejects it too"
    if any(s in why for s in ("not mapped here", "not registered here", "has no local copy", "cannot download")):
        return "refused: unmapped resource"
    if "nodes need a cluster" in why:
        return "refused: more nodes than this machine (runs on the Slurm clusters)"
    if "Docker build" in why:
        return "refused: a Docker build context"
    return "refused: other"


def render(rows: List[Row], a: argparse.Namespace) -> str:
    head = ("| job file (`cli/jobs/`) | Azure's `load_job` | mltrain " + ("dry run / live" if a.live else "dry run")
            + " | s | why |\n|---|---|---|---|---|\n")
    body = "".join(f"| `{rel}` | {azure.replace('|', '/')} | {status} | {took:.1f} | {why.replace('|', '/')} |\n"
                   for rel, azure, status, why, took in rows)
    loads = sum(1 for r in rows if r[1] == "loads")
    counts = {s: sum(1 for r in rows if r[2].split(" ")[0] == s) for s in ("ran", "refused", "failed", "stopped")}
    kinds: Dict[str, int] = {}
    for _, azure, status, why, _ in rows:
        kind = reason(azure, status.split(" ")[0], why)
        kinds[kind] = kinds.get(kind, 0) + 1
    total = f"\n{len(rows)} job files; Azure's loader loads {loads}. mltrain's dry run: " + \
        ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ".\n\n" + \
        "".join(f"- {kind}: {n}\n" for kind, n in sorted(kinds.items()))
    return head + body + total


if __name__ == "__main__":
    os.environ.setdefault("MLTRAIN_TRACKING", "on")
    sys.exit(main())
