"""Script jobs, measured in one run:

1. snapshot time of a 2,000-file source tree: cold (page cache dropped, where the OS allows it)
   and warm (the same tree again);
2. wall time of `mltrain job=script` against running the same script with `python` directly.

Usage: .venv/bin/python benchmarks/bench_script_jobs.py [--repeats 5]
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
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def make_tree(root: Path, files: int = 2000) -> None:
    for i in range(files):
        d = root / f"pkg{i // 100:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"mod{i:04d}.py").write_text(f"# module {i}\nVALUE = {i}\n" + "x = 1\n" * 40)
    (root / "train.py").write_text("print('hello from train.py')\n")
    (root / ".amlignore").write_text("*.pyc\n__pycache__/\n")


def drop_caches() -> bool:
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    from mltrain.launch import snapshot

    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-"))
    src = work / "src"
    make_tree(src)
    dropped = drop_caches()
    cold = snapshot.take(src, work / "snap-cold")
    warm = [snapshot.take(src, work / f"snap-warm{i}").seconds for i in range(a.repeats)]
    print(f"snapshot of {cold.files} files ({cold.bytes / 1024:.0f} KB): cold {cold.seconds:.3f}s"
          f"{'' if dropped else ' (page cache could not be dropped)'}, warm {statistics.median(warm):.3f}s")

    env = {**os.environ, "MLTRAIN_HOME": str(work / "home")}
    direct, via = [], []
    cmd_direct = [sys.executable, str(src / "train.py")]
    cmd_ml = [str(BIN / "mltrain"), "job=script", f"job.source_directory={src}", "job.script=train.py"]
    for cmd in (cmd_direct, cmd_ml):  # warm-up
        subprocess.run(cmd, cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)
    for _ in range(a.repeats):
        for cmd, out in ((cmd_direct, direct), (cmd_ml, via)):
            t = time.perf_counter()
            subprocess.run(cmd, cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)
            out.append(time.perf_counter() - t)
    d, m = statistics.median(direct), statistics.median(via)
    print(f"job=script on that tree: mltrain {m:.2f}s  python directly {d:.2f}s  overhead {m - d:.2f}s ({m / d:.1f}x)")


if __name__ == "__main__":
    main()
