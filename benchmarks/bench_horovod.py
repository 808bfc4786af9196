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
    p.add_argument("--polling-arm", action="store_true",
                   help="also Horovod with Open MPI busy-polling (OMPI_MCA_mpi_yield_when_idle=0)")
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-hvd-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home")}
    hvd, ddp = [], []
    # mltrain tells Open MPI to yield the core while Horovod waits (mpi_yield_when_idle=1, see
    # mltrain/backends/mpi/driver.py); the third arm is Open MPI's own busy-polling, as before that default
    polling: list = []
    arms = [("hvd", True, hvd, {}), ("ddp", False, ddp, {}),
            ("hvdpoll", True, polling, {"OMPI_MCA_mpi_yield_when_idle": "0"})][:3 if a.polling_arm else 2]
    for i in range(a.repeats):
        for name, horovod, out, extra in arms[i % len(arms):] + arms[:i % len(arms)]:
            out.append(rate({**env, **extra}, work, horovod, a.epochs, i, name))
    if polling:
        y = statistics.median(polling)
        print(f"Horovod with Open MPI busy-polling (OMPI_MCA_mpi_yield_when_idle=0): {y:.1f} img/s, ratio to DDP "
              f"{y / statistics.median(ddp):.3f} (runs {[round(x, 1) for x in polling]})")
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
