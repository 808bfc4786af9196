"""Rank FAIL_RANK exits with FAIL_CODE after FAIL_AFTER seconds; the other ranks sleep SLEEP seconds.

Each knob is read from the job's params (AML_PARAMETER_<name>), else from the environment.
"""
import os
import sys
import time


def knob(name, default):
    return os.environ.get(f"AML_PARAMETER_{name}", os.environ.get(name, default))


rank = int(os.environ["RANK"])
print(f"rank {rank} started pid={os.getpid()}", flush=True)
if rank == int(knob("FAIL_RANK", "1")):
    time.sleep(float(knob("FAIL_AFTER", "1")))
    print(f"rank {rank} failing on purpose", flush=True)
    sys.exit(int(knob("FAIL_CODE", "3")))
time.sleep(float(knob("SLEEP", "120")))
print(f"rank {rank} done", flush=True)
