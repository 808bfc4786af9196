"""Prints the rank contract and its arguments as JSON, one line, so tests can read it from the log."""
import json
import os
import sys

keys = [k for k in os.environ if k.startswith(("AZ_", "AML_PARAMETER_", "MLTRAIN_")) or k in (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT",
    "OMP_NUM_THREADS")]
print("ENV " + json.dumps({"env": {k: os.environ[k] for k in keys}, "argv": sys.argv[1:], "cwd": os.getcwd()}), flush=True)
