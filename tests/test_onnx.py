"""ONNX export of the built-in trainer's model, verified by ONNX Runtime, and scoring through it
(issue 12, part 3). Real training, real export, real ONNX Runtime on the CPU."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from support import only_run, run_mltrain, runs
from train_support import write_digits

pytestmark = pytest.mark.slow


@pytest.fixture
def digits(project) -> Path:
    write_digits(project / "train", per_class=8)
    write_digits(project / "val", per_class=4, offset=100)
    write_digits(project / "new", per_class=3, offset=150)
    return project


@pytest.mark.parametrize("model", ["resnet18", "densenet121"])
def test_trainer_exports_onnx_that_onnx_runtime_verifies(home, digits, model):
    r = run_mltrain(f"model={model}", "data=image_directory", "data.train_dir=./train", "data.val_dir=./val",
                    "trainer.epochs=1", "data.image_size=32", "trainer.batch_size=8", "trainer.export_onnx=true",
                    cwd=digits, timeout=600)
    assert r.rc == 0, r.out[-3000:] + r.err
    out = Path(only_run(home)["dir"]) / "outputs" / "model"
    report = json.loads((out / "onnx.json").read_text())
    assert (out / "model.onnx").stat().st_size == report["bytes"] > 1_000_000
    assert report["dynamic_batch"] and report["opset"] == 18 and set(report["verified_batches"]) == {"1", "8"}
    assert all(e["max_abs_error"] <= 1e-3 for e in report["verified_batches"].values())
    assert "ONNX export verified with ONNX Runtime" in r.out
    if model != "resnet18":
        return
    # Score Image Model through ONNX Runtime predicts what PyTorch predicts
    predictions = {}
    for runtime in ("pytorch", "onnxruntime"):
        s = run_mltrain("job=score_image_model", f"job.model_dir={out}", "job.image_dir=./new",
                        f"job.runtime={runtime}", f"run.id=score-{runtime}", cwd=digits, timeout=300)
        assert s.rc == 0, s.out + s.err
        with open(home / "runs" / f"score-{runtime}" / "outputs" / "predictions.csv") as f:
            predictions[runtime] = list(csv.DictReader(f))
    torch_rows, ort_rows = predictions["pytorch"], predictions["onnxruntime"]
    assert len(torch_rows) == 9
    assert [(a["path"], a["predicted_label"]) for a in torch_rows] == [(b["path"], b["predicted_label"]) for b in ort_rows]
    assert all(abs(float(a["probability"]) - float(b["probability"])) < 1e-4 for a, b in zip(torch_rows, ort_rows))
    # registering the directory records the framework
    reg = run_mltrain("models", "register", "digits-onnx", "--run", runs(home)[0]["id"], "--path", "outputs/model",
                      cwd=digits, timeout=120)
    assert reg.rc == 0 and "(ONNX)" in reg.out, reg.out + reg.err


def test_onnx_runtime_scoring_needs_an_exported_model(home, digits):
    assert run_mltrain("data=image_directory", "data.train_dir=./train", "data.val_dir=./val", "trainer.epochs=1",
                       "data.image_size=16", "run.id=plain", cwd=digits, timeout=300).rc == 0
    r = run_mltrain("job=score_image_model", f"job.model_dir={home}/runs/plain/outputs/model", "job.image_dir=./new",
                    "job.runtime=onnxruntime", cwd=digits)
    assert r.rc == 2 and r.err.strip().endswith("has no model.onnx (train it with trainer.export_onnx=true)"), r.err
