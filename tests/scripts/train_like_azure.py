"""A script written for Azure ML, run unmodified: it logs through azureml.core's Run, through
mltrain's metric API, writes ./outputs/model.pt and reads its parameters."""
import argparse
import os

import torch
from azureml.core.run import Run

from mltrain import run as mlrun

p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, required=True)
p.add_argument("--epochs", type=int, default=2)
a = p.parse_args()

azure = Run.get_context()
for epoch in range(a.epochs):
    azure.log("loss", 1.0 / (epoch + 1))
    mlrun.log("accuracy", 0.5 + epoch / 10, step=epoch)
azure.log_row("confusion", truth=1, predicted=1)
mlrun.log_list("lrs", [a.lr, a.lr / 2])
print("param", os.environ.get("AML_PARAMETER_team"), "metrics", sorted(mlrun.get_metrics()), flush=True)
os.makedirs("outputs", exist_ok=True)
torch.save({"w": torch.ones(2)}, "outputs/model.pt")
print("saved", flush=True)
