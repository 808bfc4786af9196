"""What each added step of a Slurm pipeline costs: chains of 3 and of 10 one-process steps (each reads the
previous step's output and writes its own), `mltrain pipeline=stepsN compute=slurm --force-rerun` against the
same chain by hand (`sbatch --dependency=afterok:<previous>` per step, timed until the last output exists).

Per arm, median of N rounds (the arms' order rotated every round, every arm started at the same point of the
wall-clock second: bench_pipelines.at_phase says why):
  start -> 1st submit   mltrain: until its first step is queued (every step is composed, frozen and made first)
  start -> all queued   mltrain: until the last step is queued (`--detach` returns there)
  total                 until the chain is done
  per added step        (total of 10 steps - total of 3) / 7: what one more step adds, Slurm's scheduling included;
                        mltrain's own cost per step is its figure minus the sbatch chain's
The reference arm `mltrain job` is one plain job of the same program (`mltrain job=script ... compute=slurm`):
what a pipeline's start costs beyond one job's is the pipeline's own.

Usage: .venv/bin/python benchmarks/bench_pipeline_steps.py [--repeats 3] (needs SLURM_CONF: scripts/slurm_cluster.sh)
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_pipelines import afterok_chain, at_phase  # noqa: E402 - the same phase-fair start and hand chain

BIN = Path(sys.executable).parent
STEP = ("import sys, pathlib\n"
        "text = pathlib.Path(sys.argv[1], 'x.txt').read_text() if len(sys.argv) > 2 else ''\n"
        "pathlib.Path(sys.argv[-1], 'x.txt').write_text(text + 'x')\n")
SIZES = (3, 10)


def pipeline_yaml(n: int) -> str:
    lines = ["steps:"]
    for k in range(n):
        args = "${outputs.out}" if k == 0 else "${inputs.data},${outputs.out}"
        lines += [f"  s{k}:", f"    overrides: [job=script, job.script=step.py, 'job.arguments=[{args}]']",
                  "    outputs: [out]"]
        if k:
            lines.append(f"    inputs: {{data: s{k - 1}.outputs.out}}")
    return "\n".join(lines) + "\n"


def project(work: Path) -> Path:
    proj = work / "proj"
    (proj / "conf" / "pipeline").mkdir(parents=True)
    for n in SIZES:
        (proj / "conf" / "pipeline" / f"steps{n}.yaml").write_text(pipeline_yaml(n))
    (proj / "step.py").write_text(STEP)
    return proj


def run_mltrain(proj: Path, env: dict, n: int) -> dict:
    t0 = time.time()
    proc = subprocess.Popen([str(BIN / "mltrain"), f"pipeline=steps{n}", "compute=slurm", "--force-rerun"], cwd=proj,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    queued = []
    lines = []
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.append(line)
        if "submitted as Slurm job" in line:
            queued.append(time.time())
    if proc.wait() != 0 or len(queued) != n:
        raise SystemExit(f"mltrain pipeline=steps{n} exited {proc.returncode}:\n{''.join(lines)[-3000:]}")
    return {"start -> 1st submit": queued[0] - t0, "start -> all queued": queued[-1] - t0, "total": time.time() - t0}


def run_job(work: Path, proj: Path, env: dict, i: int) -> dict:
    """The reference: one plain job (`mltrain job=script`), the same program, until it is queued and done."""
    out = work / "job"  # the same command every time, as the pipelines' are: its composition is a kept one
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    t0 = time.time()
    proc = subprocess.Popen([str(BIN / "mltrain"), "job=script", "job.script=step.py", f"job.arguments=[{out}]",
                             "compute=slurm"], cwd=proj, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    queued = None
    lines = []
    for line in proc.stdout:  # type: ignore[union-attr]
        lines.append(line)
        if queued is None and "submitted as Slurm job" in line:
            queued = time.time()
    if proc.wait() != 0 or queued is None:
        raise SystemExit(f"mltrain job=script exited {proc.returncode}:\n{''.join(lines)[-3000:]}")
    return {"start -> 1st submit": queued - t0, "start -> all queued": queued - t0, "total": time.time() - t0}


def run_sbatch(work: Path, proj: Path, env: dict, n: int, i: int) -> dict:
    out = work / f"sb{n}_{i}"
    dirs = [out / f"s{k}" for k in range(n)]
    for d in dirs:
        d.mkdir(parents=True)
    t0 = time.time()
    queued = afterok_chain(out, [(f"s{k}", 1, f"{sys.executable} {proj / 'step.py'} "
                                              + (f"{d}" if k == 0 else f"{dirs[k - 1]} {d}"))
                                 for k, d in enumerate(dirs)], env)
    target = dirs[-1] / "x.txt"
    deadline = time.time() + 600
    while not (target.is_file() and target.read_text()):
        if time.time() > deadline:
            raise SystemExit(f"the sbatch chain did not finish: {out}")
        time.sleep(0.02)
    return {"start -> 1st submit": queued[0] - t0, "start -> all queued": queued[-1] - t0, "total": time.time() - t0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("needs SLURM_CONF (scripts/slurm_cluster.sh start DIR; source DIR/env.sh)")
    work = Path(tempfile.mkdtemp(prefix="bench-pipeline-steps-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home"), "CUDA_VISIBLE_DEVICES": ""}
    proj = project(work)
    arms = {f"{who} {n}": (lambda i, n=n, who=who: run_mltrain(proj, env, n) if who == "mltrain"
                           else run_sbatch(work, proj, env, n, i))
            for n in SIZES for who in ("mltrain", "sbatch")}
    arms["mltrain job"] = lambda i: run_job(work, proj, env, i)
    for n in SIZES:  # warm-up: the first compositions, the page cache
        run_mltrain(proj, env, n)
    run_job(work, proj, env, -1)
    rows: dict = {name: [] for name in arms}
    names = list(arms)
    for i in range(args.repeats):
        phase = (i + 0.5) / args.repeats
        for name in names[i % len(names):] + names[:i % len(names)]:
            at_phase(phase)
            rows[name].append(arms[name](i))
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in rows.items()}
    print(f"median of {args.repeats} (seconds)             " + "".join(f"{n:>14s}" for n in names))
    for key in ("start -> 1st submit", "start -> all queued", "total"):
        print(f"{key:35s}" + "".join(f"{med[n][key]:14.2f}" for n in names))
    for who in ("mltrain", "sbatch"):
        per = (med[f"{who} {SIZES[1]}"]["total"] - med[f"{who} {SIZES[0]}"]["total"]) / (SIZES[1] - SIZES[0])
        queue = ((med[f"{who} {SIZES[1]}"]["start -> all queued"] - med[f"{who} {SIZES[0]}"]["start -> all queued"])
                 / (SIZES[1] - SIZES[0]))
        first = ((med[f"{who} {SIZES[1]}"]["start -> 1st submit"] - med[f"{who} {SIZES[0]}"]["start -> 1st submit"])
                 / (SIZES[1] - SIZES[0]))
        print(f"{who}: per added step {per:.3f} s of the total, {queue:.3f} s until all are queued, "
              f"{first:.3f} s before the first is")


if __name__ == "__main__":
    main()
