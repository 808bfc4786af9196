"""The built-in trainer with 2 ranks on the CPU: gradients through Horovod (hvd.DistributedOptimizer)
against DDP, both under `distribution=mpi` (the same mpirun, the same data, model and threads), so the
ratio isolates the gradient exchange. One run, alternating; train images/second of the last epoch.

Needs Horovod (`mltrain horovod build`). Usage: .venv/bin/python benchmarks/bench_horovod.py [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.executable).parent


def rate(env: dict, work: Path, horovod: bool, epochs: int, i: int, arm: str = "") -> float:
    run_id = f"{arm or ('hvd' if horovod else 'ddp')}_{i}"
    subprocess.run([str(BIN / "mltrain"), f"trainer.epochs={epochs}", "trainer.batch_size=16", "data.image_size=32",
                    "trainer.patience=100", "trainer.print_frequency=1000", "distribution=mpi",
                    "distribution.process_count_per_node=2", "distribution.backend=gloo",
                    f"distribution.horovod={str(horovod).lower()}", f"run.id={run_id}"],
                   cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)
    rows = [json.loads(line) for line in (Path(env["MLTRAIN_HOME"]) / "runs" / run_id / "metrics.jsonl").read_text().splitlines()]
    return [r["value"] for r in rows if r["name"] == "train_images_per_second" and r["step"] == epochs][0]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--yield-arm", action="store_true", help="also Horovod with OMPI_MCA_mpi_yield_when_idle=1")
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-hvd-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home")}
    hvd, ddp = [], []
    # a third arm, Horovod with Open MPI told to yield the core while it waits (mpi_yield_when_idle):
    # with as many ranks as cores, MPI's busy-polling otherwise competes with the ranks' own work
    hvd_yield: list = []
    arms = [("hvd", True, hvd, {}), ("ddp", False, ddp, {}),
            ("hvdyield", True, hvd_yield, {"OMPI_MCA_mpi_yield_when_idle": "1"})][:3 if a.yield_arm else 2]
    for i in range(a.repeats):
        for name, horovod, out, extra in arms[i % len(arms):] + arms[:i % len(arms)]:
            out.append(rate({**env, **extra}, work, horovod, a.epochs, i, name))
    if hvd_yield:
        y = statistics.median(hvd_yield)
        print(f"Horovod with OMPI_MCA_mpi_yield_when_idle=1: {y:.1f} img/s, ratio to DDP {y / statistics.median(ddp):.3f} "
              f"(runs {[round(x, 1) for x in hvd_yield]})")
    h, d = statistics.median(hvd), statistics.median(ddp)
    print(f"built-in trainer, resnet18, 2 ranks on {os.cpu_count()} CPUs, epoch {a.epochs}: Horovod {h:.1f} img/s  "
          f"DDP {d:.1f} img/s  ratio {h / d:.3f}  (runs: Horovod {[round(x, 1) for x in hvd]}, DDP {[round(x, 1) for x in ddp]})")
    build = sorted(Path(os.path.expanduser(os.environ.get("MLTRAIN_HOME", "~/.mltrain"))).glob(
        "wheels/horovod/*/mltrain_horovod_build.json"))
    for path in build:
        info = json.loads(path.read_text())
        print(f"Horovod {info['horovod']} for torch {info['torch']} ({info['python']}) built in {info['build_seconds']}s")


if __name__ == "__main__":
    main()
