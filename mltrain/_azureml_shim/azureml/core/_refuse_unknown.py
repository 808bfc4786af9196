"""A v1 object's unknown attribute is one line naming the class and attribute (never a bare AttributeError
from inside the stand-in)."""
from __future__ import annotations

from typing import Any


class RefuseUnknown:
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        from azureml.core._bridge import unsupported

        unsupported(f"{type(self).__name__}.{name}", "see the list of supported calls in mltrain's Azure ML v1 page")
