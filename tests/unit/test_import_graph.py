"""mltrain's imports point one way, from the layer that uses to the layer that is used, and form no cycle,
neither between modules nor between packages (a package importing another that imports it back).

Counted: imports at the top and inside functions, and the lazily imported tables ("module:attr" strings
given to importlib, as mltrain.backends.BACKENDS). Not counted: imports under `if TYPE_CHECKING:` (they
never run) and plain module names, which are programs started in another process (`python -m NAME`,
as a rank program or the tracking mirror), not imports. Also: the paths that launch nothing do not
import torch (tests/test_cli_validation.py)."""
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
            target, colon, attr = node.value.partition(":")
            if colon and attr.isidentifier() and target.startswith("mltrain.") and target in modules:
                found.add(target)
    return {m for m in found if m in modules and m != name}


#: The layers, bottom first; written once, here. A module belongs to the longest prefix that names it. A
#: module may import its own layer and those below it, never one above: the job spec knows no config,
#: a backend no sweep, a run record no handle. docs/architecture.md draws the same picture.
LAYERS = [
    ["mltrain.base", "mltrain.jobspec"],  # errors, home, files, processes; the job spec, the frozen job, statuses, job kinds; the compute kinds' table and schemas
    ["mltrain.config"],                                           # composition, search path, validation, aliases
    ["mltrain.environments"],                                     # curated and custom environments
    ["mltrain.runs"],                                             # run records, metrics, logs, console
    ["mltrain.ranks", "mltrain.hydra_task"],                      # the rank contract and the rank side
    ["mltrain.components", "mltrain.parallel"],                   # the built-in components the ranks run
    ["mltrain.backends", "mltrain.slurm_rank"],                   # local, mpi, slurm: driver and rank side
    ["mltrain.launch"],                                           # freezing, snapshot, dry run, orchestration
    ["mltrain.sweeps", "mltrain.pipelines", "mltrain.models", "mltrain.tracking", "mltrain.azureml",
     "mltrain.endpoints"],  # features
    ["mltrain.command"],                                          # a command to its engine (run, sweep, pipeline)
    ["mltrain.python_api", "mltrain.cli", "mltrain.__main__", "mltrain",
     "mltrain.azureml.sdk_v2"],                                   # the top (sdk_v2: azure-ai-ml's MLClient on the API)
]


def layer_of(module: str) -> int:
    best = (-1, -1)
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[1]:
                best = (i, len(prefix))
    assert best[0] >= 0, f"{module} is in no layer: add it to LAYERS"
    return best[0]


def upward(graph):
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets if layer_of(a) < layer_of(b))


def _graph():
    modules = _modules()
    return {name: _edges(name, path, modules) for name, path in modules.items()}


def test_imports_never_point_up_a_layer():
    found = upward(_graph())
    assert not found, "imports from a lower layer to a higher one:\n" + "\n".join(found)


def test_a_planted_upward_import_is_caught():
    graph = _graph()
    graph["mltrain.jobspec.job"] = graph["mltrain.jobspec.job"] | {"mltrain.python_api.handle"}  # a job spec that imports the top
    assert upward(graph) == ["mltrain.jobspec.job -> mltrain.python_api.handle"]
    graph = _graph()
    graph["mltrain.backends.slurm.backend"] = graph["mltrain.backends.slurm.backend"] | {"mltrain.pipelines.runner"}
    assert upward(graph) == ["mltrain.backends.slurm.backend -> mltrain.pipelines.runner"]


def test_every_module_has_a_layer():
    for name in _modules():
        layer_of(name)


def cycles(graph):
    """Each cycle of the graph found by a depth-first walk, as the list of its nodes, the first one repeated."""
    found, stack, state = [], [], {}

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_no_import_cycles():
    found = cycles(_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def package_of(module: str) -> str:
    """The package a module counts with for the package cycles: `mltrain.X` (a module directly under mltrain
    is its own)."""
    return ".".join(module.split(".")[:2])


def package_graph(graph):
    """{package: {package it imports: the module imports that make it so}}, between different packages."""
    out = {}
    for a, targets in graph.items():
        for b in targets:
            pa, pb = package_of(a), package_of(b)
            if pa != pb:
                out.setdefault(pa, {}).setdefault(pb, []).append(f"{a} -> {b}")
    return out


def package_cycles(graph):
    packages = package_graph(graph)
    lines = []
    for cycle in cycles({p: set(targets) for p, targets in packages.items()}):
        hops = [f"{a} -> {b} ({', '.join(sorted(packages[a][b])[:3])})" for a, b in zip(cycle, cycle[1:])]
        lines.append("; ".join(hops))
    return lines


def test_no_package_imports_another_that_imports_it_back():
    found = package_cycles(_graph())
    assert not found, "package cycles (module imports, inside functions too):\n" + "\n".join(found)


def test_a_planted_package_cycle_is_caught():
    graph = _graph()
    assert package_of("mltrain.jobspec.slurm_compute") == "mltrain.jobspec"
    assert package_of("mltrain.backends.slurm.driver") == "mltrain.backends"
    # the mirror's writer reaching back into the model registry, which is built on tracking
    graph["mltrain.tracking.writers"] = graph["mltrain.tracking.writers"] | {"mltrain.models.sqlite_registry"}
    assert not cycles(graph)  # no cycle between modules ...
    found = package_cycles(graph)  # ... but one between their packages
    assert len(found) == 1 and "mltrain.tracking.writers -> mltrain.models.sqlite_registry" in found[0], found


def test_the_graph_is_really_walked():
    modules = _modules()
    edges = _edges("mltrain.backends", modules["mltrain.backends"], modules)
    assert {"mltrain.backends.local.backend", "mltrain.backends.slurm.backend"} <= edges  # the lazy table
    assert "mltrain.backends.slurm.driver" in _edges("mltrain.backends.slurm.backend",
                                                      modules["mltrain.backends.slurm.backend"], modules)


#: Each backend package has the same roles, by design (docs/architecture.md).
BACKEND_ROLES = {"backend", "driver", "rank"}


def test_module_names_say_one_thing():
    modules = _modules()
    seen = {}
    for name in modules:
        leaf = name.rsplit(".", 1)[-1]
        if name.startswith("mltrain.backends.") and leaf in BACKEND_ROLES or name.startswith("mltrain.cli."):
            continue  # a backend's roles; a command's module is named for the command (`mltrain models`)
        if name.count(".") == 0:
            continue
        seen.setdefault(leaf, []).append(name)
    packages = {n for n, path in modules.items() if path.name == "__init__.py"}
    shared = {leaf: names for leaf, names in seen.items() if len([n for n in names if n not in packages]) > 1}
    assert not shared, f"module names used twice: {shared}"



def test_mltrains_own_map_names_every_package_and_loose_module():
    """`mltrain/__init__.py`'s docstring is a newcomer's first map: each package and loose module is on it."""
    doc = mltrain.__doc__ or ""
    packages = sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file() or p.name == "_azureml_shim")
    loose = sorted(p.stem for p in ROOT.glob("*.py") if p.stem not in ("__init__", "__main__"))
    missing = [f"{name}/" for name in packages if f"{name}/" not in doc]
    missing += [name for name in loose if not any(name in (w.strip(",;:()") for w in line.split())
                                                  for line in doc.splitlines())]
    assert not missing, f"mltrain/__init__.py's map leaves out: {missing}"
