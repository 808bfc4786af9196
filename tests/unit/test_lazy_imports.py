"""Imports sit at the top of their module, where they show the import graph, unless there is a reason to
defer them; an import inside a function says its reason in one word, in a comment at the end of its line:

- `# heavy`: torch, torchvision, numpy, PIL, scikit-learn, MLflow, ONNX, Optuna, Horovod, matplotlib,
  submitit (or an mltrain module that imports one of them at its top), kept off the paths that do not use them;
- `# optional`: a package that may be absent (an extra, or one the code guards with `except ImportError`);
- `# startup`: it measurably slows a command that does not need it (`mltrain --help`, `--cfg job`,
  `--dry-run`, `runs list`); the commit that made it lazy names the command;
- `# plugin`: a module Hydra imports for every Hydra app on the machine (hydra_plugins/mltrain_launcher)
  keeps mltrain's own imports for the moment they are used.

No reason excuses an import cycle: an import inside a function is an edge of the import graph all the same
(tests/unit/test_import_graph.py), so a cycle is broken by moving code, not by deferring an import.

Not walked: mltrain/_rank_site and mltrain/_azureml_shim, which run inside the user's own processes."""
import ast
import re
from pathlib import Path

import mltrain

ROOT = Path(mltrain.__file__).parent
LAUNCHER = ROOT.parent / "hydra_plugins" / "mltrain_launcher"  # installed beside mltrain
REASONS = ("heavy", "optional", "startup", "plugin")
SKIP = ("_rank_site", "_azureml_shim")
_REASON = re.compile(r"#\s*(" + "|".join(REASONS) + r")\s*$")


def _sources():
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if parts[0] in SKIP:
            continue
        yield path
    if LAUNCHER.is_dir():
        yield from sorted(LAUNCHER.rglob("*.py"))


def unexplained(source: str):
    """Line numbers of imports inside a function whose lines carry no reason comment."""
    lines = source.splitlines()
    found = []

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)) and in_function:
                span = lines[child.lineno - 1: child.end_lineno]
                if not any(_REASON.search(line) for line in span):
                    found.append(child.lineno)
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(ast.parse(source), False)
    return found


def test_every_import_inside_a_function_says_why():
    missing = [f"{path}:{line}" for path in _sources() for line in unexplained(path.read_text())]
    assert not missing, (f"imports inside a function without a reason ({', '.join('# ' + r for r in REASONS)}); "
                         "move them to the top of the module, or say why they stay:\n" + "\n".join(missing))


def test_the_modules_are_really_walked():
    walked = {p.relative_to(ROOT.parent).as_posix() for p in _sources()}
    assert {"mltrain/cli/main.py", "mltrain/components/trainer.py", "mltrain/launch/freeze.py"} <= walked
    assert not any("/_rank_site/" in p or "/_azureml_shim/" in p for p in walked)


def test_an_import_without_a_reason_is_caught():
    source = (
        "import os\n"
        "def f():\n"
        "    import json\n"
        "    import torch  # heavy\n"
        "    from hydra.errors import (  # startup\n"
        "        HydraException,\n"
        "    )\n"
        "    import yaml  # not a reason\n"
        "    class C:\n"
        "        def g(self):\n"
        "            from mltrain import errors\n"
        "    return lambda: __import__('x')\n"
        "class D:\n"
        "    import re\n"
    )
    assert unexplained(source) == [3, 8, 11]
