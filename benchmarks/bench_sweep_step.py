"""Where the time of a pipeline sweep goes: Azure's notebook 1c (sdk/python/jobs/pipelines/
1c_pipeline_with_hyperparameter_sweep: a `type: sweep` step of 20 trials of `train.yml`, 10 at a time,
then `predict.yml` on the best trial's outputs) as a pipeline file run by `mltrain job create`, against
what a user would otherwise do: the trial's command (`pip install 'mlflow<2.19' -q && python train.py ...`)
run 20 times by a `multiprocessing.Pool` of the same size, in the same built environment, with a
package layer where that pip install was done once beforehand. Alternating, on the local backend.

The environment is built by a first, untimed mltrain run (reported: Azure pulls its image once too);
every timed run then finds it built, and runs with `pipeline.force_rerun=true` so no step is reused.
Reports per mode the median wall time and CPU seconds (of the processes started, reaped) and, for
mltrain, from the run records' phases: the trials' own Running seconds (sum, longest), their Preparing
seconds, the sweep step's seconds before its first trial and after its last, the score step, and the
largest gap between a trial ending and the next starting.

Usage: .venv/bin/python benchmarks/bench_sweep_step.py ROOT [--repeats 2] [--trials 20] [--concurrent 10]
       where ROOT holds sdk/python/jobs/pipelines/1c_pipeline_with_hyperparameter_sweep, e.g.
       git --git-dir=$(fetch Azure/azureml-examples) archive HEAD sdk/python/jobs/pipelines | tar -x -C ROOT
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from azure_examples import _iris  # noqa: E402  (the generated iris file the conformance runs use)

BIN = Path(sys.executable).parent
NOTEBOOK = "sdk/python/jobs/pipelines/1c_pipeline_with_hyperparameter_sweep"
FIXED = {"degree": 3, "gamma": "scale", "shrinking": False, "probability": False, "tol": 0.001, "cache_size": 1024,
         "verbose": False, "max_iter": -1, "decision_function_shape": "ovr", "break_ties": False, "random_state": 42}
PIPELINE = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
experiment_name: pipeline_samples
settings:
  default_compute: azureml:cpu-cluster
jobs:
  sweep_step:
    type: sweep
    trial: ./train.yml
    inputs:
      data:
        type: uri_file
        path: {iris}
{fixed}
    search_space:
      c_value: {{type: uniform, min_value: 0.5, max_value: 0.9}}
      kernel: {{type: choice, values: [rbf, linear, poly]}}
      coef0: {{type: uniform, min_value: 0.1, max_value: 1}}
    sampling_algorithm: random
    objective: {{goal: minimize, primary_metric: training_f1_score}}
    limits: {{max_total_trials: {trials}, max_concurrent_trials: {concurrent}, timeout: 7200}}
  score_data:
    type: command
    component: ./predict.yml
    inputs:
      model: ${{{{parent.jobs.sweep_step.outputs.model_output}}}}
      test_data: ${{{{parent.jobs.sweep_step.outputs.test_data}}}}
"""


def prepare(root: Path, work: Path, trials: int, concurrent: int) -> Path:
    folder = work / "nb"
    shutil.copytree(root / NOTEBOOK, folder)
    iris = work / "iris.csv"
    _iris(iris)
    fixed = "".join(f"      {k}: {json.dumps(v)}\n" for k, v in FIXED.items()).rstrip("\n")
    (folder / "pipeline.yml").write_text(PIPELINE.format(iris=iris, fixed=fixed, trials=trials, concurrent=concurrent))
    (folder / ".mltrain" / "compute").mkdir(parents=True)
    (folder / ".mltrain" / "compute" / "cpu-cluster.yaml").write_text("defaults: [local_schema, _self_]\n")
    return folder


def cpu_s() -> float:
    """CPU seconds of this process's reaped descendants (a pipeline's steps and trials, a Pool's commands)."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def mltrain_run(folder: Path, home: Path) -> dict:
    env = {**os.environ, "MLTRAIN_HOME": str(home), "MLTRAIN_AZUREML": "1"}
    before = {p.name for p in (home / "runs").iterdir()} if (home / "runs").is_dir() else set()
    start, cpu = time.perf_counter(), cpu_s()
    subprocess.run([str(BIN / "mltrain"), "job", "create", "--file", "pipeline.yml", "pipeline.force_rerun=true",
                    "run.console=none"], cwd=folder, env=env, check=True, stdout=subprocess.DEVNULL)
    wall, cpu = time.perf_counter() - start, cpu_s() - cpu
    new = [p for p in (home / "runs").iterdir() if p.name not in before and not p.name.startswith("_")]
    return {"wall_s": wall, "cpu_s": cpu, **phases(new)}


def phases(runs: list) -> dict:
    """What the run records say: the trials' phases against the sweep step's and the score step's."""
    docs = {p.name: json.loads((p / "run.json").read_text()) for p in runs if (p / "run.json").is_file()}
    trials = [d for d in docs.values() if d.get("sweep", {}).get("dir")]
    step = next(d for n, d in docs.items() if n.endswith(".sweep_step"))["phases"]
    score = next(d for n, d in docs.items() if n.endswith(".score_data"))["phases"]
    running = [d["phases"]["Completed"] - d["phases"]["Running"] for d in trials]
    ends = sorted(d["phases"]["Completed"] for d in trials)
    starts = sorted(d["phases"]["NotStarted"] for d in trials)
    gaps = [s - max(e for e in ends if e <= s) for s in starts if any(e <= s for e in ends)]
    env = trials[0]["environment"]
    return {"trials": len(trials), "trial_running_sum_s": sum(running), "trial_running_max_s": max(running),
            "trial_preparing_sum_s": sum(d["phases"]["Running"] - d["phases"]["Preparing"] for d in trials),
            "step_before_first_s": starts[0] - step["Running"], "step_after_last_s": step["Completed"] - ends[-1],
            "score_s": score["Completed"] - step["Completed"], "max_gap_s": max(gaps, default=0.0),
            "interpreter": env.get("interpreter"), "materialized": env.get("materialized")}


def _trial(args: tuple) -> tuple:
    layer, folder, out, params = args
    argv = " ".join(f"--{k} {v}" for k, v in params.items())
    command = (f"pip install 'mlflow<2.19' -q && python train.py --data {folder.parent / 'iris.csv'} {argv} "
               f"--model_output {out}/model_output --test_data {out}/test_data")
    (out / "test_data").mkdir(parents=True)
    env = {**os.environ, "PATH": f"{layer}/bin:{os.environ['PATH']}", "MLFLOW_TRACKING_URI": f"file://{out}/mlruns"}
    start, cpu = time.perf_counter(), cpu_s()
    subprocess.run(["/bin/sh", "-c", command], cwd=folder / "train-src", env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, cpu_s() - cpu


def baseline_layer(interpreter: str, work: Path) -> tuple:
    """A user's one-off setup: a virtual environment over the built one, `pip install 'mlflow<2.19'` once."""
    layer = work / "user-layer"
    start = time.perf_counter()
    paths = json.loads(subprocess.run([interpreter, "-c", "import sys, json; print(json.dumps(sys.path))"],
                                      capture_output=True, text=True, check=True).stdout)
    subprocess.run([interpreter, "-m", "venv", "--without-pip", str(layer)], check=True)
    site = next(layer.glob("lib/python*/site-packages"))
    (site / "_env.pth").write_text("\n".join(p for p in paths if "site-packages" in p) + "\n")
    (layer / "bin" / "pip").write_text(f"#!{layer}/bin/python\nimport sys\nfrom pip._internal.cli.main import main\n"
                                       "sys.exit(main())\n")
    (layer / "bin" / "pip").chmod(0o755)
    subprocess.run([str(layer / "bin" / "pip"), "install", "-q", "mlflow<2.19"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return layer, time.perf_counter() - start


def pool_run(layer: Path, folder: Path, work: Path, trials: int, concurrent: int, seed: int) -> dict:
    rng = random.Random(seed)
    outs = work / f"pool-{seed}"
    shutil.rmtree(outs, ignore_errors=True)
    jobs = [(layer, folder, outs / str(i), {"C": rng.uniform(0.5, 0.9), "kernel": rng.choice(["rbf", "linear", "poly"]),
                                            "coef0": rng.uniform(0.1, 1), **FIXED}) for i in range(trials)]
    start = time.perf_counter()
    with Pool(concurrent) as pool:
        each = pool.map(_trial, jobs)
    return {"wall_s": time.perf_counter() - start, "cpu_s": sum(c for _, c in each),
            "trial_sum_s": sum(w for w, _ in each), "trial_max_s": max(w for w, _ in each)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("root", type=Path)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--concurrent", type=int, default=10)
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-sweep-step-"))
    folder = prepare(a.root, work, a.trials, a.concurrent)
    home = work / "home"
    first = mltrain_run(folder, home)  # builds the environment once (Azure: the image pulled once)
    print(f"first run (builds the environment): {first['wall_s']:.1f}s wall", flush=True)
    layer, setup_s = baseline_layer(first["interpreter"], work)
    print(f"baseline setup (venv over the environment, pip install 'mlflow<2.19' once): {setup_s:.1f}s", flush=True)
    rows = {"mltrain": [], "pool": []}
    for i in range(a.repeats):  # alternating: both see the same machine state in turn
        rows["mltrain"].append(mltrain_run(folder, home))
        rows["pool"].append(pool_run(layer, folder, work, a.trials, a.concurrent, i))
        print(f"repeat {i + 1}: mltrain {rows['mltrain'][-1]['wall_s']:.1f}s, pool {rows['pool'][-1]['wall_s']:.1f}s "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)

    def med(mode: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[mode])

    m, b = med("mltrain", "wall_s"), med("pool", "wall_s")
    print(f"\n{a.trials} trials, {a.concurrent} at a time, {os.cpu_count()} cores, median of {a.repeats}")
    print(f"{'':<44} {'mltrain':>8} {'Pool':>8}")
    print(f"{'wall s (the pipeline / a Pool of the commands)':<44} {m:>8.1f} {b:>8.1f}   ratio {m / b:.2f}")
    c, d = med("mltrain", "cpu_s"), med("pool", "cpu_s")
    print(f"{'CPU s (all processes)':<44} {c:>8.1f} {d:>8.1f}   ratio {c / d:.2f}")
    print(f"{'trials: sum of own seconds':<44} {med('mltrain', 'trial_running_sum_s'):>8.1f} {med('pool', 'trial_sum_s'):>8.1f}")
    print(f"{'trials: longest':<44} {med('mltrain', 'trial_running_max_s'):>8.1f} {med('pool', 'trial_max_s'):>8.1f}")
    for key, what in (("trial_preparing_sum_s", "trials: sum Preparing"), ("step_before_first_s", "sweep step before first trial"),
                      ("step_after_last_s", "sweep step after last trial"), ("max_gap_s", "largest gap trial end -> next"),
                      ("score_s", "score step (after the sweep step)")):
        print(f"{what:<44} {med('mltrain', key):>8.1f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
