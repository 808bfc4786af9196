"""ONNX export of a trained model directory, verified against PyTorch with ONNX Runtime, and scoring
through ONNX Runtime. torch's exporter (torch.onnx.export with torch.export underneath, which needs
onnxscript), onnx and onnxruntime come from the `onnx` extra; asking for ONNX without them is one line.

The exported graph has a dynamic batch dimension; it is checked on the CPU at batch 1 and at the
training batch size (`assert_allclose(rtol=1e-3, atol=1e-5)` on the logits), and what was checked
(opset, sizes, the largest errors) is written beside it in onnx.json.
"""
from __future__ import annotations

import importlib.util
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Dict, Tuple

from mltrain.components.designer_errors import InvalidModelDirectoryError

ONNX_FILE, REPORT_FILE = "model.onnx", "onnx.json"
PACKAGES = ("onnx", "onnxscript", "onnxruntime")
INSTALL = "pip install 'mltrain[onnx]'"
RTOL, ATOL = 1e-3, 1e-5
#: The opsets torch's exporter (dynamo=True) writes as asked: it builds every graph at opset 18
#: (torch.onnx._internal.exporter._constants.TORCHLIB_OPSET) and converts only upwards, so a lower
#: opset silently comes out as 18; torch.onnx._constants.ONNX_MAX_OPSET (23) is the highest it
#: supports. Written here because the driver checks them without importing torch;
#: tests/unit/test_onnx_opsets.py compares them with the installed torch.
OPSETS = (18, 23)


def missing() -> Tuple[str, ...]:
    """The ONNX packages this interpreter lacks (looked up, not imported)."""
    return tuple(p for p in PACKAGES if importlib.util.find_spec(p) is None)


def export(model: Any, directory: Path, image_size: int, batch_size: int, opset: int = 18) -> Dict[str, Any]:
    """Write directory/model.onnx from an eval-mode model, verify it, and return (and write) the report."""
    import numpy as np  # heavy
    import torch  # heavy

    model = model.eval()
    directory.mkdir(parents=True, exist_ok=True)
    example = torch.randn(2, 3, image_size, image_size)
    tmp = directory / f".{ONNX_FILE}.tmp"
    start = time.perf_counter()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # torch.export's notes on the graph, not the user's concern
        program = torch.onnx.export(model, (example,), dynamo=True, opset_version=opset, verbose=False,
                                    input_names=["input"], output_names=["logits"],
                                    dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=4096)},))
        program.save(str(tmp))
    seconds = time.perf_counter() - start
    session = session_for(tmp)
    errors = {}
    for batch in sorted({1, int(batch_size)}):
        x = torch.randn(batch, 3, image_size, image_size)
        with torch.no_grad():
            expected = model(x).numpy()
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
        try:
            np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
        except AssertionError:
            os.unlink(tmp)
            raise RuntimeError(f"the ONNX export does not match PyTorch at batch {batch}: largest difference "
                               f"{float(np.abs(got - expected).max()):.3g} (rtol {RTOL}, atol {ATOL})") from None
        errors[str(batch)] = {"max_abs_error": float(np.abs(got - expected).max()),
                              "max_rel_error": float((np.abs(got - expected) / (np.abs(expected) + 1e-12)).max())}
    os.replace(tmp, directory / ONNX_FILE)
    import onnx  # heavy
    import onnxruntime  # heavy

    report = {"file": ONNX_FILE, "opset": opset, "bytes": (directory / ONNX_FILE).stat().st_size,
              "input": [None, 3, image_size, image_size], "dynamic_batch": True, "export_seconds": round(seconds, 2),
              "verified_batches": errors, "rtol": RTOL, "atol": ATOL, "onnx": onnx.__version__,
              "onnxruntime": onnxruntime.__version__, "torch": torch.__version__}
    tmp_report = directory / f".{REPORT_FILE}.tmp"
    tmp_report.write_text(json.dumps(report, indent=2))
    os.replace(tmp_report, directory / REPORT_FILE)
    return report


def session_for(path: Path):
    import onnxruntime as ort  # heavy

    options = ort.SessionOptions()
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads and threads.isdigit():  # the rank's share of the cores, as torch gets it
        options.intra_op_num_threads = int(threads)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxModel:
    """Scores like the PyTorch model: called on a batch tensor, returns logits as a tensor."""

    def __init__(self, directory: str) -> None:
        path = Path(directory).expanduser() / ONNX_FILE
        if not path.is_file():
            raise InvalidModelDirectoryError(f"'{directory}' has no {ONNX_FILE}: train with trainer.export_onnx=true")
        self.session = session_for(path)
        self.input = self.session.get_inputs()[0].name

    def __call__(self, x):
        import torch  # heavy

        return torch.from_numpy(self.session.run(None, {self.input: x.numpy()})[0])
