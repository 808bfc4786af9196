"""One line for a mistake in the user's configs or overrides: an error Hydra raises inside one of the user's
presets, any other Hydra or OmegaConf error, a preset that is not YAML. It lives beside the schema, not in
mltrain.base.errors, because it names the schema's keys (errors is imported by the schema)."""
from __future__ import annotations

import dataclasses
import re
from typing import Optional

from mltrain.base.errors import MltrainError, first_line, one_line, yaml_error_line
from mltrain.jobspec import job_schemas, schema


def user_error(exc: BaseException) -> Optional[MltrainError]:
    """The one line a mistake in the user's configs or overrides gets, as a MltrainError (the exception itself
    when it is one already); None for anything else (a defect: let it be seen)."""
    if isinstance(exc, MltrainError):
        return exc
    import yaml  # startup

    if isinstance(exc, yaml.YAMLError):  # one of the user's own presets does not parse
        return MltrainError(yaml_error_line(exc))
    from hydra.errors import ConfigCompositionException, HydraException  # startup
    from omegaconf.errors import OmegaConfBaseException  # startup

    if not isinstance(exc, (HydraException, OmegaConfBaseException)):
        return None
    inside_preset = isinstance(exc, ConfigCompositionException) and composition_error_line(str(exc))
    return MltrainError(inside_preset or one_line(exc))


def composition_error_line(text: str) -> Optional[str]:
    """Hydra reports an error inside a preset as "In 'group/option': KeyError raised while composing
    config:" followed by OmegaConf's lines, with no exception attached: read the key and the schema."""
    m = re.match(r"In '([^']+)': (\w+) raised while composing config:\n(.*)", text, re.S)
    if not m:
        return None
    where, kind, rest = m.groups()
    key = re.search(r"full_key: (\S+)", rest)
    if kind in ("ConfigKeyError", "ConfigAttributeError") and key:
        ref = re.search(r"(?:reference|object)_type=(\w+)", rest)
        allowed = _schema_fields(ref.group(1)) if ref else []
        extra = f" (allowed keys: {', '.join(allowed)})" if allowed else ""
        return f"{key.group(1)}: unknown key in {where}{extra}"
    return f"{where}: {first_line(rest)}" + (f" ({key.group(1)})" if key else "")


def _schema_fields(name: str) -> list:
    cls = getattr(schema, name, None) or getattr(job_schemas, name, None)
    return [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
