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


def test_a_drivers_request_and_outcome_have_one_writer_and_one_reader():
    # A sweep's or pipeline's detached driver gets its request and gives back its outcome through two files:
    # their names (and so their formats) appear in mltrain/launch/multirun_files.py only
    found = []
    for rel, tree in _modules(skip=("launch/multirun_files.py",)):
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in ("request.json", "outcome.json"):
                found.append(f"{rel}:{node.lineno} {node.value}")
    assert not found, f"a driver's files named outside mltrain/launch/multirun_files.py: {found}"


def test_another_mltrain_command_is_run_in_the_foreground_in_one_place():
    # `runs resume` in the sweep's folder and a pipeline's sweep step run another mltrain command and exit as it
    # does, passing it the signals that cancel: mltrain.processes.run_in_foreground, not a Popen of their own
    found = []
    for rel, tree in _modules(skip=("processes.py",)):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Popen":
                words = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
                if "mltrain" in words and "-m" in words:  # `python -m mltrain ...`: a command, not a program
                    found.append(f"{rel}:{node.lineno}")
    assert not found, f"mltrain commands started outside mltrain.processes.run_in_foreground: {found}"
