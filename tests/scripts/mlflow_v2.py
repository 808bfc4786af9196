"""An Azure ML v2 training script: it logs through MLflow's own API, knowing nothing of mltrain."""
import os

import mlflow

rank = int(os.environ.get("RANK", "0"))
mlflow.log_param("learning_rate", 0.01)  # every rank, the same value
if rank == 0:
    for step in range(3):
        mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
mlflow.log_metric(f"done_rank_{rank}", 1.0)
print(f"rank {rank} logged through mlflow to {os.environ.get('MLFLOW_TRACKING_URI')}")
