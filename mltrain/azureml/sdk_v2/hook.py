"""The selection: with MLTRAIN_AZUREML=1 in the environment, `azure.ai.ml.MLClient` is mltrain's client.

The wheel's `.pth` line calls `install()` at interpreter start only when the variable is set (one
environment lookup otherwise). `install()` adds an import finder that lets `azure.ai.ml` import as usual
and then sets its `MLClient` to mltrain's; the client module itself is imported on first use, so an
interpreter that never imports azure-ai-ml pays nothing more.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from typing import Any, Optional, Sequence

from mltrain.azureml.sdk_v2 import INSTALL, SELECT_ENV

TARGET = "azure.ai.ml"


def selected() -> bool:
    return os.environ.get(SELECT_ENV, "") not in ("", "0", "false", "no")


def install() -> None:
    """Make `azure.ai.ml.MLClient` mltrain's from now on (and at once if azure.ai.ml is already imported)."""
    module = sys.modules.get(TARGET)
    if module is not None:
        patch(module)
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def patch(module: Any) -> None:
    from mltrain.azureml.sdk_v2.client import MLClient  # startup

    module.MLClient = MLClient
    ml_client = sys.modules.get(TARGET + "._ml_client")
    if ml_client is not None:
        ml_client.MLClient = MLClient


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        return self._inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if fullname not in ("azure", "azure.ai", TARGET):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None:  # selected, but the SDK is not there: say what to install, in one line
            raise ModuleNotFoundError(INSTALL, name=fullname)
        if fullname != TARGET or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


def startup() -> None:
    """What the `.pth` line calls: nothing unless mltrain is selected."""
    if selected():
        install()
