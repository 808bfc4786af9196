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


def _nodes_where(matches, skip: tuple = ()) -> list:
    """`file:line` of every node of the package (outside `skip`) that `matches`."""
    return [f"{rel}:{node.lineno}" for rel, tree in _modules(skip) for node in ast.walk(tree) if matches(node)]


def _is_string(node, test) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and test(node.value)


def test_the_working_directory_is_changed_only_in_a_ranks_child_process():
    # command/sweep_step_program.py runs only as a pipeline step's rank program, whose one work is its sweep
    found = _nodes_where(lambda n: isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                         and n.func.attr in ("chdir", "fchdir"),
                         skip=("ranks/", "_rank_site/", "_azureml_shim/", "command/sweep_step_program.py"))
    assert not found, f"os.chdir outside mltrain/ranks: {found}"


def test_only_the_cli_makes_the_mltrain_error_line():
    found = _nodes_where(lambda n: _is_string(n, lambda v: "mltrain: error:" in v), skip=("cli/",))
    assert not found, f"'mltrain: error:' text outside mltrain/cli: {found}"


def test_a_drivers_request_and_outcome_have_one_writer_and_one_reader():
    # A sweep's or pipeline's detached driver gets its request and gives back its outcome through two files:
    # their names (and so their formats) appear in mltrain/launch/multirun_files.py only
    found = _nodes_where(lambda n: _is_string(n, lambda v: v in ("request.json", "outcome.json")),
                         skip=("launch/multirun_files.py",))
    assert not found, f"a driver's files named outside mltrain/launch/multirun_files.py: {found}"


def test_another_mltrain_command_is_run_in_the_foreground_in_one_place():
    # `runs resume` in the sweep's folder and a pipeline's sweep step run another mltrain command and exit as it
    # does, passing it the signals that cancel: mltrain.base.processes.run_in_foreground, not a Popen of their own
    def runs_mltrain(node) -> bool:  # `python -m mltrain ...`: a command, not a program
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Popen"):
            return False
        words = {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        return {"mltrain", "-m"} <= words

    # far_side.py: the remote cluster's side, standard library only (it installs mltrain there), which starts
    # `mltrain runs resume` detached, as a driver that outlives the ssh call, never in the foreground
    found = _nodes_where(runs_mltrain, skip=("processes.py", "backends/remote/far_side.py"))
    assert not found, f"mltrain commands started outside mltrain.base.processes.run_in_foreground: {found}"


def test_the_newcomers_map_names_modules_that_exist():
    """docs/architecture.md's map of one job from each front end to its backend: every hop a module of the tree."""
    import re

    repo = Path(__file__).resolve().parents[2]
    section = (repo / "docs" / "architecture.md").read_text().split("## A newcomer's map", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`(mltrain/[\w/]+\.py)`", section)
    assert len(named) >= 25, named
    missing = sorted({m for m in named if not (repo / m).is_file()})
    assert not missing, f"docs/architecture.md's map names modules that do not exist: {missing}"
