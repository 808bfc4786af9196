"""Fails on its first attempt, succeeds when resumed (the marker lives in the run directory)."""
import os
import sys

marker = os.path.join(os.environ["MLTRAIN_RUN_DIR"], "outputs", "first_attempt_done")
if not os.path.exists(marker):
    open(marker, "w").close()
    print("first attempt: failing on purpose", flush=True)
    sys.exit(3)
print(f"resumed: rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} ok", flush=True)
