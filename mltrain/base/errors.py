"""mltrain's exceptions, and the one-line rendering of every error a user can cause.

Rule: bad input gets one clear line (what is wrong, which key, what is allowed), a non-zero exit and
no traceback. Hydra and OmegaConf errors are multi-line, so they are rewritten here.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence


class MltrainError(Exception):
    """An error meant for the user; its message is shown as is."""

    exit_code = 2


class ConfigError(MltrainError):
    """An invalid configuration value, found before anything starts."""

    def __init__(self, key: str, problem: str, allowed: Optional[Iterable[object]] = None):
        self.key, self.problem = key, problem
        self.allowed = list(allowed) if allowed is not None else None
        text = f"{key}: {problem}"
        if self.allowed is not None:
            text += f" (allowed: {', '.join(str(a) for a in self.allowed)})"
        super().__init__(text)


class RunFailed(MltrainError):
    """A run ended Failed; the message names the rank, its exit code and the tail of its log."""

    exit_code = 1


class RunCanceled(MltrainError):
    exit_code = 130


def first_line(text: str) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return str(text).strip()


def _visible(options: Sequence[str]) -> list:
    # Schema nodes (`*_schema`) are the typed bases of the presets, not choices.
    return [o for o in options if not o.endswith("_schema")]


def one_line(exc: BaseException) -> str:
    """Render any configuration or composition error as a single line."""
    from hydra.errors import (  # startup
        ConfigCompositionException,
        MissingConfigException,
        OverrideParseException,
    )
    from omegaconf.errors import (  # startup
        ConfigAttributeError,
        ConfigKeyError,
        InterpolationResolutionError,
        MissingMandatoryValue,
        OmegaConfBaseException,
        ValidationError,
    )

    if isinstance(exc, MltrainError):
        return str(exc)
    if isinstance(exc, MissingConfigException):
        options = sorted(_visible(getattr(exc, "options", None) or []))
        missing = getattr(exc, "missing_cfg_file", None) or ""
        if "/" in missing:
            import difflib  # startup

            group, _, name = missing.rpartition("/")
            close = difflib.get_close_matches(name, options, n=3, cutoff=0.5)
            hint = f"closest: {', '.join(close)}; " if close else ""
            return f"{group}={name} is not a known option ({hint}allowed: {', '.join(options) or 'none found'})"
        return first_line(str(exc))
    if isinstance(exc, OverrideParseException):
        return f"cannot parse override: {first_line(str(exc))}"
    cause = exc.__cause__ if isinstance(exc, ConfigCompositionException) else exc
    if isinstance(cause, OmegaConfBaseException):
        key = getattr(cause, "full_key", None) or getattr(cause, "key", None) or "?"
        msg = first_line(getattr(cause, "msg", None) or str(cause))
        if isinstance(cause, MissingMandatoryValue):
            return f"{key}: a value is required (set {key}=...)"
        if isinstance(cause, (ConfigKeyError, ConfigAttributeError)):
            parent = getattr(cause, "parent_node", None)
            allowed = _visible([str(k) for k in parent.keys()]) if parent is not None else []
            extra = f" (allowed keys: {', '.join(allowed)})" if allowed else ""
            return f"{key}: unknown key{extra}"
        if isinstance(cause, ValidationError):
            return f"{key}: {msg}"
        if isinstance(cause, InterpolationResolutionError):
            return f"{key}: {msg} (write $VAR, not ${{VAR}}, for a variable expanded in each rank)"
        return f"{key}: {msg}"
    if isinstance(exc, ConfigCompositionException):
        text = first_line(str(exc))
        if "Could not override" in str(exc) and "+" in str(exc):
            text += " (the key does not exist; check its spelling)"
        return text
    return f"{type(exc).__name__}: {first_line(str(exc))}"


def yaml_error_line(exc: BaseException) -> Optional[str]:
    """A preset that is not valid YAML: its file, line and column, and what the parser expected."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or first_line(str(exc))
    if mark is None:
        return f"invalid YAML: {problem}"
    return f"{mark.name}: invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}"
