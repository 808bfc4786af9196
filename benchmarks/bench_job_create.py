"""`mltrain job create --file hello-world.yml` against the equivalent `mltrain job=command` run: the
cost of reading, checking and mapping an Azure ML v2 job file on top of mltrain's own path. Both run
the same command to completion, locally, alternating, and the ratio of the medians is printed (target
<= 1.2).

Usage: .venv/bin/python benchmarks/bench_job_create.py [--pairs 9]
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

BIN = Path(sys.executable).parent
HELLO = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: echo "hello world"
environment:
  image: library/python:latest
"""


def timed(cmd, cwd, env) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=9)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "hello-world.yml").write_text(HELLO)
        env = {**os.environ, "MLTRAIN_HOME": str(Path(tmp, "home")), "MLTRAIN_TRACKING": "off"}
        v2 = [str(BIN / "mltrain"), "job", "create", "--file", "hello-world.yml"]
        plain = [str(BIN / "mltrain"), "job=command", "job.command='echo \"hello world\"'"]
        timed(v2, tmp, env), timed(plain, tmp, env)  # warm the page cache and Python's bytecode
        pairs = [(timed(v2, tmp, env), timed(plain, tmp, env)) for _ in range(a.pairs)]
    first, second = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
    ratios = sorted(x / y for x, y in pairs)
    print(f"job create --file hello-world.yml: {first:.3f} s   job=command: {second:.3f} s   "
          f"ratio of medians {first / second:.2f} (pairs {ratios[0]:.2f}-{ratios[-1]:.2f}, target <= 1.2)")


if __name__ == "__main__":
    main()
