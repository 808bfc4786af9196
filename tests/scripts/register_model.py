"""Seed 001's ending, unmodified in shape: save the model into outputs/, register it from inside the job."""
import os

from azureml.core.run import Run

os.makedirs("outputs", exist_ok=True)
with open("outputs/model.pt", "wb") as f:
    f.write(b"weights of rank 0 " + os.environ["MLTRAIN_RUN_ID"].encode())
run = Run.get_context()
model = run.register_model(model_name="seed001", model_path="outputs/model.pt", tags={"area": "digits"},
                           properties={"accuracy": "0.93"}, description="from inside the job")
print(f"registered {model.name} version {model.version} framework {model.framework}")
