"""Waits for a checkpoint request: on SIGUSR1 it takes a second to save, says so, then exits (a program that a
worker exiting at once would kill mid-save, its last line lost)."""
import os
import signal
import sys
import time


def on_usr1(signum, frame):
    time.sleep(1.0)  # saving its checkpoint
    print(f"saved attempt={os.environ.get('MLTRAIN_ATTEMPT')}", flush=True)
    sys.exit(0)


signal.signal(signal.SIGUSR1, on_usr1)
print(f"waiting attempt={os.environ.get('MLTRAIN_ATTEMPT')}", flush=True)
for _ in range(1200):
    time.sleep(0.1)
