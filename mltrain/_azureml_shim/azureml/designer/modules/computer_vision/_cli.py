"""The command lines of Azure's computer-vision modules, read as python-fire reads them: `--name value`,
`--name=value`, dashes or underscores, a lone `--switch` meaning True, True/False spelt either way. A wrong
flag or value, like any error of the component, is one line on stderr and exit status 2."""
from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, Optional

TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no")


def ensure_mltrain(module: str) -> None:
    """Run on mltrain's interpreter: a job's command may start another `python` (the system's) that has the
    stand-ins on its path but not mltrain; every rank is told mltrain's own in MLTRAIN_PYTHON."""
    import importlib.util
    import os

    if importlib.util.find_spec("mltrain") is None:
        python = os.environ.get("MLTRAIN_PYTHON")
        # once: mltrain's own interpreter that still cannot import it is refused, never started again (the path
        # as given, not resolved: a job's virtual environment may stand on the same base interpreter)
        if not python or os.path.abspath(python) == os.path.abspath(sys.executable):
            fail(module.rsplit(".", 1)[-1], "mltrain is not importable by this Python; run it with mltrain's")
        os.execv(python, [python, "-m", module, *sys.argv[1:]])


def parse(argv: List[str], types: Dict[str, type], required: List[str], module: str,
          aliases: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """`aliases`: other spellings of a flag that Azure's own component files use (name -> the name here)."""
    values: Dict[str, Any] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("--"):
            fail(module, f"unexpected argument '{token}' (flags are --name value)")
        name, eq, text = token[2:].partition("=")
        name = name.replace("-", "_")
        name = (aliases or {}).get(name, name)
        if name not in types:
            fail(module, f"unknown flag --{name.replace('_', '-')} (allowed: "
                         f"{', '.join('--' + n.replace('_', '-') for n in types)})")
        value: Optional[str] = text if eq else None
        if value is None and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            value, i = argv[i + 1], i + 1
        values[name] = convert(module, name, value, types[name])
        i += 1
    missing = [n for n in required if n not in values]
    if missing:
        fail(module, f"--{missing[0].replace('_', '-')} is required")
    return values


def convert(module: str, name: str, value: Optional[str], kind: type) -> Any:
    if kind is bool:
        if value is None or value.lower() in TRUE:
            return True
        if value.lower() in FALSE:
            return False
        # Azure's module reads its flags with python-fire, which hands `224` on as a number and any other
        # word as a string, and tests the flag for truth (Azure's own image_classification_with_densenet
        # passes --center-crop 224). Taken as Azure takes it, and said.
        try:
            truth = float(value) != 0
        except ValueError:
            truth = bool(value)
        print(f"note: {module}: --{name.replace('_', '-')} is True or False; '{value}' is taken as {truth}, as "
              "Azure's module takes it", file=sys.stderr, flush=True)
        return truth
    if value is None:
        fail(module, f"--{name.replace('_', '-')} needs a value")
    try:
        return kind(value)
    except ValueError:
        fail(module, f"--{name.replace('_', '-')} takes {'an integer' if kind is int else 'a number'}, got '{value}'")


def fail(module: str, message: str) -> None:
    print(f"error: {module}: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def run(module: str, call: Callable[[], Any]) -> None:
    """Run the component; mltrain's one-line errors stay one line."""
    from mltrain.base.errors import MltrainError

    try:
        call()
    except MltrainError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        sys.exit(exc.exit_code)
