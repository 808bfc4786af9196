"""Conformance: Azure's own example job files (github.com/Azure/azureml-examples, `cli/jobs/basics/` and
`cli/jobs/pipelines-with-components/basics/`) run unmodified with `mltrain job create --file`, from a
fetched copy outside this repository. Prints a markdown table: each job file, passed / failed / refused
(with mltrain's one line) and seconds.

The copy gets a `.mltrain/` folder at its top, as a repository would keep one: `cpu-cluster` and
`gpu-cluster` mapped to a compute (`local` here, or `--compute slurm`), the datastore and web URIs the
examples read mapped to local copies (iris.csv written from scikit-learn's own copy), their two data
assets, and the three components example 1b registers by name. Nothing of Azure's files is changed.

Usage: .venv/bin/python benchmarks/azure_examples.py /tmp/azex [--compute slurm] [--timeout 240]
       (where /tmp/azex holds `git archive` of the two folders plus cli/assets/model)
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
FOLDERS = ("cli/jobs/basics", "cli/jobs/pipelines-with-components/basics")
JOB_SCHEMAS = ("commandJob", "sweepJob", "pipelineJob", "autoMLJob")


def set_up(root: Path, compute: str) -> None:
    conf = root / ".mltrain"
    (conf / "compute").mkdir(parents=True, exist_ok=True)
    schema = "slurm_schema" if compute == "slurm" else "local_schema"
    for name in ("cpu-cluster", "gpu-cluster"):
        (conf / "compute" / f"{name}.yaml").write_text(f"defaults: [{schema}, _self_]\n")
    data = root / "local-data"
    (data / "example-data").mkdir(parents=True, exist_ok=True)
    (data / "azureml").mkdir(parents=True, exist_ok=True)
    _iris(data / "example-data" / "iris.csv")
    (data / "azureml" / "4b_datastore_datapath_uri").mkdir(exist_ok=True)
    (data / "azureml" / "4b_datastore_datapath_uri" / "hello-world.txt").write_text("hello world\n")
    (data / "outputs").mkdir(exist_ok=True)
    (conf / "datastores.yaml").write_text(
        "azureml://datastores/workspaceblobstore/paths/example-data/: local-data/example-data\n"
        "azureml://datastores/workspaceblobstore/paths/azureml: local-data/azureml\n"
        "azureml://datastores/workspaceblobstore/paths/: local-data/outputs\n"
        "wasbs://datasets@azuremlexamples.blob.core.windows.net/: local-data/example-data\n"
        "https://azuremlexamples.blob.core.windows.net/datasets/: local-data/example-data\n")
    (conf / "data").mkdir(exist_ok=True)
    four_d = "cli/jobs/pipelines-with-components/basics/4d_data_input/data"
    (conf / "data" / "local-folder-example.yaml").write_text(f"path: ../../{four_d}\n")
    (conf / "data" / "sampledata.yaml").write_text("path: ../../local-data/example-data\n")
    (conf / "components").mkdir(exist_ok=True)
    one_b = root / "cli/jobs/pipelines-with-components/basics/1b_e2e_registered_components"
    for name, file in (("my_train", "train.yml"), ("my_score", "score.yml"), ("my_eval", "eval.yml")):
        link = conf / "components" / f"{name}.yml"
        if not link.exists():
            link.symlink_to(one_b / file)


def _iris(path: Path) -> None:
    if path.exists():
        return
    from sklearn.datasets import load_iris

    iris = load_iris()
    lines = [",".join([*iris.feature_names, "species"])]
    lines += [",".join([*(f"{x:g}" for x in row), iris.target_names[t]]) for row, t in zip(iris.data, iris.target)]
    path.write_text("\n".join(lines) + "\n")


def job_files(root: Path):
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.yml")):
            head = path.read_text(errors="replace")[:400]
            if any(s in head for s in JOB_SCHEMAS):
                yield path


def run(path: Path, root: Path, extra, timeout: float):
    start = time.perf_counter()
    proc = subprocess.Popen([str(BIN / "mltrain"), "job", "create", "--file", path.name, *extra], cwd=path.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # mltrain cancels its run and stops its ranks
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # an environment build it waits for
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        return "stopped", f"still running after {timeout:.0f} s (stopped by this harness)", time.perf_counter() - start
    took = time.perf_counter() - start
    errors = [line for line in err.splitlines() if line.startswith("mltrain: error: ")]
    if proc.returncode == 0:
        return "passed", "", took
    if errors and proc.returncode == 2:
        return "refused", errors[-1][len("mltrain: error: "):], took
    tail = (errors or out.strip().splitlines() or ["?"])[-1]
    return "failed", tail, took


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", type=Path)
    ap.add_argument("--compute", default="local", choices=("local", "slurm"))
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--runs", default="/tmp/azex-runs", help="run.root for the example runs")
    a = ap.parse_args()
    root = a.root.resolve()
    set_up(root, a.compute)
    extra = [f"run.root={a.runs}"]
    if a.compute == "slurm":  # every job on the cluster, also those that name no compute: one word, as a user does
        extra += ["compute=slurm", "compute.poll_s=0.3"]
    rows = []
    for path in job_files(root):
        status, why, took = run(path, root, extra, a.timeout)
        rel = path.relative_to(root)
        rows.append((str(rel), status, why, took))
        print(f"{status:8} {took:6.1f}s  {rel}  {why}", file=sys.stderr, flush=True)
    print(f"| job file ({a.compute}) | result | seconds | note |")
    print("|---|---|---|---|")
    for rel, status, why, took in rows:
        short = rel.replace("cli/jobs/pipelines-with-components/basics/", "pwc/").replace("cli/jobs/basics/", "")
        print(f"| `{short}` | {status} | {took:.1f} | {why.replace('|', '/')} |")
    counts = {s: sum(1 for r in rows if r[1] == s) for s in ("passed", "refused", "failed", "stopped")}
    print(f"\n{len(rows)} files: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MLTRAIN_TRACKING", "on")
    sys.exit(main())
