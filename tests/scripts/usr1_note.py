"""Waits for a checkpoint request: on SIGUSR1 it notes whether checkpoint_requested exists in the
run directory, then exits so that submitit can requeue the job."""
import os
import signal
import sys
import time
from pathlib import Path


def on_usr1(signum, frame):
    flag = Path(os.environ["MLTRAIN_RUN_DIR"], "checkpoint_requested").exists()
    print(f"got SIGUSR1 attempt={os.environ.get('MLTRAIN_ATTEMPT')} checkpoint_requested={flag}", flush=True)
    sys.exit(0)


signal.signal(signal.SIGUSR1, on_usr1)
print(f"waiting attempt={os.environ.get('MLTRAIN_ATTEMPT')}", flush=True)
for _ in range(1200):
    time.sleep(0.1)
