"""Runs mirrored into MLflow's store: the mirror (mirroring.py, also the program `python -m
mltrain.tracking.mirroring RUN_DIR...` that mltrain.runs.mlflow_run starts) and where it writes (writers.py)."""
