"""mltrain's imports form no cycle, counting imports inside functions and the lazily imported tables
(string names of mltrain modules given to importlib); imports under `if TYPE_CHECKING:` never run
and are not counted. Also: the paths that launch nothing do not import torch (checked in test_cli)."""
import ast
from pathlib import Path

import mltrain

ROOT = Path(mltrain.__file__).parent


def _modules():
    out = {}
    for path in ROOT.rglob("*.py"):
        if "_azureml_shim" in path.parts:
            continue
        rel = path.relative_to(ROOT.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out[name] = path
    return out


def _edges(name, path, modules):
    tree = ast.parse(path.read_text())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for b in node.body for n in ast.walk(b))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            target = node.value.split(":", 1)[0]
            if target.startswith("mltrain.") and target in modules:
                found.add(target)
    return {m for m in found if m in modules and m != name}


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _edges(name, path, modules) for name, path in modules.items()}
    cycles, stack, state = [], [], {}

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_graph_is_really_walked():
    modules = _modules()
    edges = _edges("mltrain.backends", modules["mltrain.backends"], modules)
    assert {"mltrain.backends.local.backend", "mltrain.backends.slurm.backend"} <= edges  # the lazy table
    assert "mltrain.backends.slurm.driver" in _edges("mltrain.backends.slurm.backend",
                                                      modules["mltrain.backends.slurm.backend"], modules)
