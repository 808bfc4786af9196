"""Other libraries' internals are touched in one module per library, its fence, which says for each use why and
which version of the library it was checked against. Everywhere else in mltrain (and its Hydra launcher plugin)
a private name of another library is neither imported nor read, and nothing is patched with `mock`.

What counts as touching another library's private name, outside its fence (an AST walk, a heuristic):
- importing a private module or name of it (`from hydra._internal.x import y`, `from omegaconf import _utils`),
  or naming a private module of it in a string (`importlib.import_module("hydra._internal....")`);
- `X._name` where X is, or is derived from, a name imported from it: a name imported from a third-party module,
  a variable assigned from an expression that starts with one (`ret = run_job(...)`, `inner = ex._executor`),
  or a parameter annotated with one (`cfg: DictConfig`);
- `getattr(obj, "_name")` (or hasattr, setattr) of any object but a module of the standard library: mltrain
  reads its own private attributes directly (`self._x`), never through getattr with a literal name;
- assigning `sys.modules["NAME"]` for another library's module (submitit's numpy import skipped).
mltrain's own private names (`self._lock`) and the standard library's stay allowed. Not walked:
mltrain/_rank_site and mltrain/_azureml_shim, which stand in for Azure's own packages inside the user's process.
"""
import ast
import sys
from pathlib import Path

import pytest

import mltrain

ROOT = Path(mltrain.__file__).parent
LAUNCHERS = ROOT.parent / "hydra_plugins" / "mltrain_launcher"  # installed beside mltrain
SKIP = ("_rank_site", "_azureml_shim")

#: {the import name of a library: its fence, the one module that touches its internals}
FENCES = {
    "hydra": "mltrain/config/hydra_internals.py",
    "omegaconf": "mltrain/config/omegaconf_internals.py",
    "submitit": "mltrain/backends/slurm/submitit_internals.py",
    "azure": "mltrain/azureml/sdk_v2/azure_ai_ml_internals.py",
    "optuna": "mltrain/sweeps/optuna_internals.py",
}
#: Top-level modules that are mltrain's own (azureml: the v1 SDK's stand-in, mltrain/_azureml_shim) or typing's.
OWN = {"mltrain", "hydra_plugins", "azureml", "__future__", "_typeshed"}
ACCESSORS = ("getattr", "hasattr", "setattr", "delattr")


def _foreign(module: str) -> bool:
    top = module.split(".")[0]
    return top not in OWN and top not in sys.stdlib_module_names


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _bound(target):
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _bound(e)]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return []


def _imported(tree):
    """({name bound by an import of another library: that library}, {name bound by a standard library import})"""
    foreign, stdlib = {}, set()
    for node in ast.walk(tree):
        pairs = []
        if isinstance(node, ast.Import):
            pairs = [((a.asname or a.name).split(".")[0], a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            pairs = [(a.asname or a.name, node.module) for a in node.names]
        for name, module in pairs:
            if _foreign(module):
                foreign[name] = module.split(".")[0]
            elif module.split(".")[0] in sys.stdlib_module_names:
                stdlib.add(name)
    for node in ast.walk(tree):  # def finish(code, _threading=threading): the module kept past interpreter teardown
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = [*node.args.posonlyargs, *node.args.args]
            for arg, default in zip(args[len(args) - len(node.args.defaults):], node.args.defaults):
                if _root(default) in stdlib:
                    stdlib.add(arg.arg)
    return foreign, stdlib


def _derived(tree, foreign):
    """The names imported from other libraries, and those derived from them: {name: the library}."""
    tainted = dict(foreign)
    changed = True
    while changed:
        changed = False
        for node in ast.walk(tree):
            targets, value = [], None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                targets, value = [node.optional_vars], node.context_expr
            elif isinstance(node, (ast.For, ast.comprehension)):
                targets, value = [node.target], node.iter
            elif isinstance(node, ast.arg) and node.annotation is not None and node.arg not in ("self", "cls"):
                names = [n.id for n in ast.walk(node.annotation) if isinstance(n, ast.Name)]
                names += [n.value.split("[")[0].split(".")[0] for n in ast.walk(node.annotation)
                          if isinstance(n, ast.Constant) and isinstance(n.value, str)]
                library = next((tainted[n] for n in names if n in tainted), None)
                if library and node.arg not in tainted:
                    tainted[node.arg] = library
                    changed = True
                continue
            library = tainted.get(_root(value)) if value is not None else None
            if library is None:
                continue
            for target in targets:
                for name in _bound(target):
                    if name not in tainted:
                        tainted[name] = library
                        changed = True
    return tainted


def touches(source: str):
    """[(line, library or None when unknown, what)] for each touch of another library's internals."""
    tree = ast.parse(source)
    foreign, stdlib = _imported(tree)
    tainted = _derived(tree, foreign)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module and _foreign(node.module):
            if any(_private(p) for p in node.module.split(".")) or any(_private(a.name) for a in node.names):
                found.append((node.lineno, node.module.split(".")[0], ast.unparse(node)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _foreign(alias.name) and any(_private(p) for p in alias.name.split(".")):
                    found.append((node.lineno, alias.name.split(".")[0], ast.unparse(node)))
        elif isinstance(node, ast.Attribute) and _private(node.attr) and _root(node.value) in tainted:
            found.append((node.lineno, tainted[_root(node.value)], ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ACCESSORS
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _private(node.args[1].value) and _root(node.args[0]) not in stdlib):
            found.append((node.lineno, tainted.get(_root(node.args[0])), ast.unparse(node)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value:
            parts = node.value.split(".")
            if all(p.isidentifier() for p in parts) and _foreign(parts[0]) and parts[0] in FENCES \
                    and any(_private(p) for p in parts[1:]):
                found.append((node.lineno, parts[0], repr(node.value)))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if (isinstance(target, ast.Subscript) and ast.unparse(target.value) == "sys.modules"
                        and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)
                        and _foreign(target.slice.value)):
                    found.append((node.lineno, None, ast.unparse(node)))
    return sorted(set(found), key=lambda f: (f[0], f[2]))


#: namedtuple's public API, underscored so as not to clash with its fields
NAMEDTUPLE = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}


def _defined(tree) -> set:
    """Every name this module binds itself: its functions, classes, variables, parameters, attributes it sets."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _root(node.value) in ("self", "cls"):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def others_private(source: str):
    """[(line, what)] for each private attribute read or set on an object whose module owns it and this one does
    not: a foreign object (`entity._status = ...`) or another mltrain module's (`rank._proc`). A private name
    belongs to the module that defines it (`self._x = ...`, `def _x`); the standard library's stay allowed."""
    tree = ast.parse(source)
    _, stdlib = _imported(tree)
    own = _defined(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)) or node.attr in NAMEDTUPLE:
            continue
        root = _root(node.value)
        if root in ("self", "cls") or root in stdlib:
            continue
        if isinstance(node.ctx, ast.Store) or node.attr not in own:
            found.append((node.lineno, ast.unparse(node)))
    return sorted(set(found))


def mocks(source: str):
    """Lines importing mock (unittest.mock, or the `mock` package)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [node.lineno for a in node.names if a.name in ("mock", "unittest.mock")]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            if node.module in ("mock", "unittest.mock") or (node.module == "unittest"
                                                            and any(a.name == "mock" for a in node.names)):
                out.append(node.lineno)
    return out


def _sources():
    for path in sorted(ROOT.rglob("*.py")):
        if path.relative_to(ROOT).parts[0] not in SKIP:
            yield path
    if LAUNCHERS.is_dir():
        yield from sorted(LAUNCHERS.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT.parent).as_posix()


def test_other_libraries_internals_are_touched_only_in_their_fence():
    fences = {path: library for library, path in FENCES.items()}
    outside = []
    for path in _sources():
        rel = _rel(path)
        for line, library, what in touches(path.read_text()):
            if rel not in fences:
                outside.append(f"{rel}:{line}: {what}")
            elif library not in (None, fences[rel]):
                outside.append(f"{rel}:{line}: {what} (the fence of {fences[rel]}, touching {library})")
    assert not outside, ("another library's private names outside its fence (" + ", ".join(FENCES.values())
                         + "): move the use there, with why and the version it was checked against:\n" + "\n".join(outside))


def test_no_module_reads_or_sets_another_objects_private_attributes():
    fences = set(FENCES.values())
    found = [f"{_rel(p)}:{line}: {what}" for p in _sources() if _rel(p) not in fences
             for line, what in others_private(p.read_text())]
    assert not found, ("a private attribute of another module's or library's object (give its owner a public name, "
                       "or move the use into the library's fence):\n" + "\n".join(found))


@pytest.mark.parametrize("source, expected", [
    ("def f(entity):\n    entity._status = 'Completed'\n", ["entity._status"]),
    ("def f(rank):\n    return rank._proc\n", ["rank._proc"]),
    ("def f(worker):\n    worker.slots[0]._stop()\n", ["worker.slots[0]._stop"]),
    # allowed: this module's own private names, the standard library's, namedtuple's API
    ("class A:\n    def __init__(self):\n        self._x = 1\n    def same(self, other):\n        return other._x\n", []),
    ("def _helper():\n    pass\nclass A:\n    _helper = staticmethod(_helper)\ndef f(a):\n    return a._helper\n", []),
    ("import os\nimport sys\nos._exit(0)\nsys._getframe(1)\n", []),
    ("def f(point):\n    return point._replace(x=1)._asdict()\n", []),
])
def test_another_objects_private_attribute_is_caught(source, expected):
    assert [what for _, what in others_private(source)] == expected


def test_each_fence_says_what_it_was_checked_against():
    for library, rel in FENCES.items():
        path = ROOT.parent / rel
        assert path.is_file(), rel
        tree = ast.parse(path.read_text())
        checked = [n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "CHECKED_AGAINST"]
        assert checked, f"{rel}: CHECKED_AGAINST = {{distribution: version}} names what its uses were checked against"
        versions = ast.literal_eval(checked[0].value)
        doc = ast.get_docstring(tree) or ""
        for distribution, version in versions.items():
            assert f"{distribution} {version}" in doc, f"{rel}: its docstring says 'Checked against {distribution} {version}'"
        assert touches(path.read_text()), f"{rel} touches nothing of {library}: is it still a fence?"


def test_no_mock_outside_the_tests():
    found = [f"{_rel(p)}:{line}" for p in _sources() for line in mocks(p.read_text())]
    assert not found, "mock imported by mltrain itself (patch nothing in production code):\n" + "\n".join(found)


def test_hydra_private_modules_are_reached_from_its_fence_only():
    """Also by text: a module path in a string (importlib) or a comment-free reference."""
    users = sorted(_rel(p) for p in _sources() if "hydra._internal" in p.read_text() and _rel(p) != FENCES["hydra"])
    assert not users, f"import Hydra's internals through mltrain.config.hydra_internals: {users}"


def test_the_sources_are_really_walked():
    walked = {_rel(p) for p in _sources()}
    assert {"mltrain/cli/main.py", "mltrain/backends/slurm/submission.py", *FENCES.values()} <= walked
    assert not any("/_azureml_shim/" in p for p in walked)


@pytest.mark.parametrize("source, expected", [
    ("from omegaconf.basecontainer import BaseContainer\nBaseContainer._resolvers\n", ["BaseContainer._resolvers"]),
    ("from hydra.core.utils import run_job\ndef f():\n    ret = run_job()\n    return ret._return_value\n",
     ["ret._return_value"]),
    ("import submitit\ndef f():\n    ex = submitit.AutoExecutor('.')\n    inner = ex._executor\n    return inner._x\n",
     ["ex._executor", "inner._x"]),
    ("from omegaconf import DictConfig\ndef f(cfg: DictConfig):\n    return cfg._get_node('a')\n", ["cfg._get_node"]),
    ("from omegaconf import DictConfig\ndef f(cfg: 'DictConfig'):\n    return cfg._get_node('a')\n", ["cfg._get_node"]),
    ("from hydra._internal.hydra import Hydra\n", ["from hydra._internal.hydra import Hydra"]),
    ("from azure.ai.ml.operations._component_operations import _refine_component\n",
     ["from azure.ai.ml.operations._component_operations import _refine_component"]),
    ("import importlib\nimportlib.import_module('hydra._internal.core_plugins.basic_sweeper')\n",
     ["'hydra._internal.core_plugins.basic_sweeper'"]),
    ("def f(entity):\n    return getattr(entity, '_source_path', None)\n", ["getattr(entity, '_source_path', None)"]),
    ("import sys\nsys.modules['numpy'] = None\n", ["sys.modules['numpy'] = None"]),
    # allowed: mltrain's own private names, the standard library's, a loaded module registered under its own name
    ("class A:\n    def f(self):\n        self._x = 1\n        return self._x\n", []),
    ("from mltrain.runs.record import RunRecord\ndef f(r: RunRecord):\n    return r._path\n", []),
    ("import threading as _t\nimport os\ngetattr(_t, '_shutdown', None)\nos._exit(0)\n", []),
    ("import threading\ndef f(_threading=threading):\n    return getattr(_threading, '_shutdown', None)\n", []),
    ("import sys\ndef f(spec, module):\n    sys.modules[spec.name] = module\n", []),
    ("from omegaconf import OmegaConf\nOmegaConf.to_container({})\n", []),
])
def test_a_touch_is_caught(source, expected):
    assert [what for _, _, what in touches(source)] == expected


def test_a_mock_is_caught():
    assert mocks("from unittest import mock\nimport unittest.mock\nfrom unittest.mock import patch\nimport mock\n"
                 "from unittest import TestCase\n") == [1, 2, 3, 4]
