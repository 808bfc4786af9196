"""The opset range the driver checks trainer.onnx_opset against (without torch) is the installed
torch exporter's own: it writes 18 and up, and supports up to its ONNX_MAX_OPSET."""
from __future__ import annotations

import pytest

from mltrain.components.onnx_export import OPSETS


def test_the_opset_range_is_torchs():
    constants = pytest.importorskip("torch.onnx._constants")
    exporter = pytest.importorskip("torch.onnx._internal.exporter._constants")
    assert OPSETS == (exporter.TORCHLIB_OPSET, constants.ONNX_MAX_OPSET)
