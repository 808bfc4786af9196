"""One line for an error Hydra raises inside one of the user's presets. It lives beside the schema, not in
mltrain.errors, because it names the schema's keys (errors is imported by the schema)."""
from __future__ import annotations

import dataclasses
import re
from typing import Optional

from mltrain.errors import first_line
from mltrain.spec import job_schemas, schema


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
