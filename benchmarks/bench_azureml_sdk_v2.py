"""azure-ai-ml on mltrain: `ml_client.jobs.create_or_update(command_job)` + `ml_client.jobs.stream(name)` of
a trivial command, in a script run with MLTRAIN_AZUREML=1, against `mltrain job create --file` of the
same job as a v2 YAML file. Both run the command to completion, locally, alternating; each is a fresh
process, timed from outside. The SDK's own import is excluded two ways, both printed: (a) the time
`import azure.ai.ml` takes inside the script; (b) the wall time of a process that only imports
azure.ai.ml (its import and its interpreter's teardown of those ~1,500 modules, about a second, which
(a) leaves in). Prints the ratios of the medians (target <= 1.2).

Usage: .venv/bin/python benchmarks/bench_azureml_sdk_v2.py [--pairs 7]
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
"""
SCRIPT = """\
import sys, time
start = time.perf_counter()
from azure.ai.ml import MLClient, command
imported = time.perf_counter() - start
ml_client = MLClient(None, "s", "rg", "ws")
job = ml_client.jobs.create_or_update(command(command='echo "hello world"'))
ml_client.jobs.stream(job.name)
print("IMPORT", imported, file=sys.stderr)
"""


def timed(cmd, cwd, env) -> tuple:
    start = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    imported = [float(line.split()[1]) for line in p.stderr.splitlines() if line.startswith("IMPORT ")]
    return wall, (imported[0] if imported else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=7)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "hello-world.yml").write_text(HELLO)
        Path(tmp, "hello_sdk.py").write_text(SCRIPT)
        env = {**os.environ, "MLTRAIN_HOME": str(Path(tmp, "home")), "MLTRAIN_TRACKING": "off"}
        sdk = [sys.executable, "hello_sdk.py"]
        sdk_env = {**env, "MLTRAIN_AZUREML": "1"}
        yaml_cmd = [str(BIN / "mltrain"), "job", "create", "--file", "hello-world.yml"]
        bare = [sys.executable, "-c", "import azure.ai.ml"]
        timed(sdk, tmp, sdk_env), timed(yaml_cmd, tmp, env), timed(bare, tmp, env)  # warm caches and bytecode
        rows = []
        for _ in range(a.pairs):
            (wall, imported), (cli, _), (alone, _) = timed(sdk, tmp, sdk_env), timed(yaml_cmd, tmp, env), timed(bare, tmp, env)
            rows.append((wall, imported, alone, cli))
    wall_m, imp_m, alone_m, cli_m = (statistics.median(r[i] for r in rows) for i in range(4))
    a_m = statistics.median(r[0] - r[1] for r in rows)
    b_m = statistics.median(r[0] - r[2] for r in rows)
    print(f"SDK script (create_or_update + stream): {wall_m:.3f} s in all; import azure.ai.ml inside it {imp_m:.3f} s; "
          f"a process that only imports it {alone_m:.3f} s")
    print(f"job create --file: {cli_m:.3f} s")
    print(f"(a) script - in-script import: {a_m:.3f} s, ratio {a_m / cli_m:.2f}   "
          f"(b) script - import-only process: {b_m:.3f} s, ratio {b_m / cli_m:.2f}   "
          f"with the SDK's import: {wall_m / cli_m:.2f}   (target <= 1.2)")


if __name__ == "__main__":
    main()
