"""The scoring script of an MLflow model deployed without one, as Azure's no-code deployment serves it.

A request is {"input_data": {"columns": [...], "index": [...], "data": [[...], ...]}} (pandas' split form), or
{"input_data": [[...], ...]} (a list of rows, or a tensor); the answer is the model's predictions as a list.
"""
import json
import os
from pathlib import Path

model = None


def init():
    global model
    import mlflow.pyfunc  # heavy

    found = sorted(Path(os.environ["AZUREML_MODEL_DIR"]).rglob("MLmodel"))
    if not found:
        raise FileNotFoundError(f"no MLmodel file under {os.environ['AZUREML_MODEL_DIR']}: not an MLflow model")
    model = mlflow.pyfunc.load_model(str(found[0].parent))


def run(raw_data):
    import numpy as np  # heavy
    import pandas as pd  # heavy

    payload = json.loads(raw_data)
    data = payload.get("input_data", payload.get("data")) if isinstance(payload, dict) else payload
    if isinstance(data, dict) and "data" in data:
        frame = pd.DataFrame(data["data"], columns=data.get("columns"), index=data.get("index"))
    elif isinstance(data, dict):
        frame = pd.DataFrame(data)
    else:
        frame = pd.DataFrame(np.asarray(data))
    predictions = model.predict(frame)
    if hasattr(predictions, "tolist"):
        return predictions.tolist()
    if hasattr(predictions, "to_dict"):
        return predictions.to_dict(orient="records")
    return predictions
