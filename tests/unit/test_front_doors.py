"""The front-door rules (issue 50, item 3), held by an AST walk of the installed package:

- the working directory is changed only where a rank's program starts (mltrain/ranks/, in the forked child):
  everywhere else mltrain runs in threads (a packed worker's GPU slots, the UI's server, a pipeline's
  steps), and `os.chdir` would move every thread's relative paths at once;
- the `mltrain: error: ...` line is made only by the CLI (mltrain/cli/): engines and programs raise, or use
  their own program's name (argparse's `PROG: error:`), so that no text is made to be parsed back.
"""
import ast
from pathlib import Path

import mltrain

ROOT = Path(mltrain.__file__).parent


def _modules(skip: tuple = ()):
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith(skip):
            yield rel, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_the_working_directory_is_changed_only_in_a_ranks_child_process():
    found = []
    for rel, tree in _modules(skip=("ranks/", "_rank_site/", "_azureml_shim/")):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("chdir", "fchdir"):
                found.append(f"{rel}:{node.lineno}")
    assert not found, f"os.chdir outside mltrain/ranks: {found}"


def test_only_the_cli_makes_the_mltrain_error_line():
    found = []
    for rel, tree in _modules(skip=("cli/",)):
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "mltrain: error:" in node.value:
                found.append(f"{rel}:{node.lineno}")
    assert not found, f"'mltrain: error:' text outside mltrain/cli: {found}"
