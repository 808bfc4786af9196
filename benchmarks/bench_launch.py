"""Launch overhead of mltrain, measured against what a user would otherwise run, in one run.

1. A 2-rank trivial gloo job: `mltrain job=script distribution=pytorch ...` vs
   `torchrun --nproc_per_node=2` and TorchX's `torchx run -s local_cwd --wait dist.ddp -j 1x2` on the
   same script (wall time, median of N alternating runs; TorchX from `pip install 'mltrain[bench]'`).
2. `mltrain --cfg job` vs a bare Hydra app's `--cfg job`.
3. Peak resident memory of the mltrain driver process itself (not its ranks), read from
   /proc/<pid>/status VmHWM while it runs.

Usage: .venv/bin/python benchmarks/bench_launch.py [--repeats 7] [--cfg-only]
(--cfg-only: item 2 alone, with `mltrain --dry-run` against the bare app's run: issue 26's composition target)
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent


def timed(cmd, cwd, env) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def peak_rss_mb(cmd, cwd, env) -> float:
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.01)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} failed")
    return peak / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cfg-only", action="store_true", help="only `--cfg job` against the bare Hydra app")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home")}
    script = str(HERE / "assets" / "trivial_gloo.py")
    mltrain = [str(BIN / "mltrain"), "job=script", f"job.script={script}", "distribution=pytorch",
               "distribution.process_count_per_node=2", "distribution.backend=gloo"]
    torchrun = [str(BIN / "torchrun"), "--nproc_per_node=2", script]
    torchx = [str(BIN / "torchx"), "run", "-s", "local_cwd", "--wait", "dist.ddp", "-j", "1x2", "--script", script]
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # TorchX's local_cwd scheduler runs `torchrun`
    cfg_mltrain = [str(BIN / "mltrain"), "--cfg", "job"]
    cfg_hydra = [sys.executable, str(HERE / "assets" / "bare_hydra_app.py"), "--cfg", "job"]

    if args.cfg_only:
        cfg_only(work, env, cfg_mltrain, cfg_hydra, args.repeats)
        return
    # one warm-up each so that the page cache is equally warm for both sides
    for cmd in (mltrain, torchrun, torchx, cfg_mltrain, cfg_hydra):
        timed(cmd, work, env)
    t_ml, t_tr, t_tx, c_ml, c_hy = [], [], [], [], []
    for _ in range(args.repeats):
        t_ml.append(timed(mltrain, work, env))
        t_tr.append(timed(torchrun, work, env))
        t_tx.append(timed(torchx, work, env))
        c_ml.append(timed(cfg_mltrain, work, env))
        c_hy.append(timed(cfg_hydra, work, env))
    rss = peak_rss_mb(mltrain, work, env)

    ml, tr, tx, cm, ch = (statistics.median(x) for x in (t_ml, t_tr, t_tx, c_ml, c_hy))
    print(f"2-rank gloo job   mltrain {ml:.2f}s  torchrun {tr:.2f}s  ratio {ml / tr:.2f}  (target <= 1.0)")
    print(f"2-rank gloo job   mltrain {ml:.2f}s  TorchX local_cwd {tx:.2f}s  ratio {ml / tx:.2f}  (target <= 1.0)")
    print(f"--cfg job         mltrain {cm:.3f}s  bare Hydra app {ch:.3f}s  ratio {cm / ch:.2f}  (target <= 1.1)")
    print(f"driver peak RSS   {rss:.0f} MB  (target < 150 MB; torch is not loaded in the driver)")
    print(f"medians of {args.repeats} alternating runs, {os.cpu_count()} CPUs")


def cfg_only(work, env, cfg_mltrain, cfg_hydra, repeats: int) -> None:
    """Composition alone: `mltrain --cfg job` against the bare app's `--cfg job`, and `mltrain --dry-run`
    (compose, freeze, print the plan; nothing starts) against the bare app running its task (compose,
    make its output folder, print the config)."""
    dry_mltrain = [cfg_mltrain[0], "--dry-run"]
    run_hydra = cfg_hydra[:2]
    pairs = {"--cfg job": (cfg_mltrain, cfg_hydra), "--dry-run": (dry_mltrain, run_hydra)}
    for ours, theirs in pairs.values():
        timed(ours, work, env), timed(theirs, work, env)
    times = {name: ([], []) for name in pairs}
    for _ in range(repeats):
        for name, (ours, theirs) in pairs.items():
            times[name][0].append(timed(ours, work, env))
            times[name][1].append(timed(theirs, work, env))
    for name, (ml, hy) in times.items():
        cm, ch = statistics.median(ml), statistics.median(hy)
        ratios = statistics.median(m / h for m, h in zip(ml, hy))
        peer = "bare Hydra app" + (" --cfg job" if name == "--cfg job" else " run")
        print(f"{name:<17} mltrain {cm:.3f}s  {peer} {ch:.3f}s  ratio {cm / ch:.2f}  (median of the pairs' ratios "
              f"{ratios:.2f}; target <= 1.1; {repeats} alternating pairs, {os.cpu_count()} CPUs)")

if __name__ == "__main__":
    main()
