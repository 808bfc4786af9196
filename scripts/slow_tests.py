"""Writes tests/slow_tests.txt: the tests a `--durations=0` run of the quick loop found slower than a threshold,
which tests/conftest.py then marks `slow`, so that `-m "not slow"` stays a quick loop (issue 50, item 7).

    .venv/bin/pytest -p no:cacheprovider -q -m "not slow" -n 2 --dist loadgroup --durations=0 > /tmp/quick.log
    .venv/bin/python scripts/slow_tests.py /tmp/quick.log [--threshold 1.5]

A test's setup, call and teardown count together; a parametrized test is listed by its function (any of its
cases past the threshold marks them all). Ids already in the file stay: a run of `-m "not slow"` cannot see them.
"""
from __future__ import annotations

import argparse
import collections
import re
from pathlib import Path

FILE = Path(__file__).resolve().parent.parent / "tests" / "slow_tests.txt"
LINE = re.compile(r"\s*([\d.]+)s (?:call|setup|teardown)\s+(\S+)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("log", type=Path)
    ap.add_argument("--threshold", type=float, default=1.5, help="seconds a test may take in the quick loop")
    a = ap.parse_args()
    text = a.log.read_text(encoding="utf-8").split("slowest durations", 1)[-1]
    took: dict = collections.defaultdict(float)
    for match in LINE.finditer(text):
        took[match.group(2).split("@")[0]] += float(match.group(1))
    functions: dict = {}
    for node, seconds in took.items():
        name = node.split("[")[0]
        functions[name] = max(functions.get(name, 0.0), seconds)
    kept = [line for line in FILE.read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")] if FILE.exists() else []
    slow = sorted(set(kept) | {name for name, seconds in functions.items() if seconds >= a.threshold})
    header = (f"# Tests marked `slow` by tests/conftest.py: each took {a.threshold} s or more in the quick loop on this project's\n"
              "# 2-core machine (scripts/slow_tests.py writes this file from a `--durations=0` log; see its docstring).\n")
    FILE.write_text(header + "".join(f"{name}\n" for name in slow), encoding="utf-8")
    print(f"{len(slow)} tests in {FILE} ({len(slow) - len(kept)} new)")


if __name__ == "__main__":
    main()
