"""What the v1 stand-ins share: mltrain's errors raised as Azure's exception classes, the submitting
line of the user's control script, and one-line refusals of what cannot run here.

mltrain itself is imported inside functions only: `import azureml.core` stays fast (no Hydra, no
torch, no MLflow) until something is submitted."""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, NoReturn

from azureml.exceptions import UserErrorException

_SHIM_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def origin(front_end: str = "azureml-v1") -> Dict[str, Any]:
    """The user's own line that called into the stand-ins (run.json's `origin`)."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_SHIM_ROOT):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return {"front_end": front_end}
    return {"front_end": front_end, "file": os.path.abspath(frame.f_code.co_filename), "line": frame.f_lineno}


class NotInStandIn(NotImplementedError, AttributeError):
    """A v1 call mltrain does not run. Also an AttributeError, so `hasattr(run, name)` answers False."""


def unsupported(what: str, instead: str) -> NoReturn:
    """A v1 call that has no local meaning: one line naming it and what to use instead."""
    raise NotInStandIn(f"{what} is not available in mltrain's Azure ML stand-in: {instead}")


def as_user_error(exc: BaseException) -> UserErrorException:
    """An mltrain error (its one line) as Azure's UserErrorException, the class v1 raises for bad input."""
    return UserErrorException(str(exc), inner_exception=exc)
