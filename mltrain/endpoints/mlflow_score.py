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
    from mlflow.utils.proto_json_utils import dataframe_from_parsed_json  # heavy

    payload = json.loads(raw_data)
    data = payload.get("input_data", payload.get("data")) if isinstance(payload, dict) else payload
    schema = model.metadata.get_input_schema()
    if isinstance(data, dict) and "data" in data:
        # pandas' split form, each column cast to the model's signature (a string column sent as numbers is
        # made strings), as MLflow's own scoring server and Azure's no-code deployment parse it
        frame = dataframe_from_parsed_json(data, pandas_orient="split", schema=schema)
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
