"""A pipeline's steps and the graph between them, read from the `pipeline` node and checked whole
before anything runs: a missing step or output, an unknown key, a bad name or a cycle is one line.

An input is another step's output (`prepare.outputs.data`), which is also the edge of the graph, or
an external path, hashed by content unless the step says `hash: mtime` or `hash: none`. `after:` adds
an edge where no data flows. An external path may name the web address it is downloaded from (`url:`, a
v2 job file's web input): a dry run plans it before it is there; a run needs it there.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from mltrain.base.errors import ConfigError

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
STEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
REFERENCE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_-]*)\.outputs\.([A-Za-z_][A-Za-z0-9_]*)$")
HASH_MODES = ("content", "mtime", "none")
INPUT_KEYS = ("path", "hash", "url")


@dataclass(frozen=True)
class Input:
    name: str
    # Another step's output ...
    step: Optional[str] = None
    output: Optional[str] = None
    # ... or a path outside the pipeline, and how its content is told apart.
    path: Optional[str] = None
    hash: str = "content"
    url: Optional[str] = None  # where `path` is downloaded from (a dry run's path is not there yet)


@dataclass
class Step:
    name: str
    overrides: List[str]
    params: Dict[str, Any]
    inputs: Dict[str, Input]
    outputs: List[str]
    after: List[str]
    allow_reuse: bool = True
    version: Optional[str] = None
    hash_paths: List[str] = field(default_factory=list)
    # A step whose program only drives other runs (an Azure sweep step's controller): on a scheduler it
    # asks for one CPU and no GPU, so it never holds what the runs it starts are waiting for.
    controller: bool = False
    #: config values composed over the step's groups, typed as they are (a front end's step: no override text)
    values: Dict[str, Any] = field(default_factory=dict)
    index: int = 0
    parents: List[str] = field(default_factory=list)


def parse(node: Dict[str, Any], cwd: str, dry_run: bool = False) -> List[Step]:
    """The steps of a pipeline node (plain data, interpolations unresolved), parents first. In a dry run
    an input downloaded when the pipeline starts (`url:`) need not be there yet."""
    raw = node.get("steps") or {}
    if not raw:
        raise ConfigError("pipeline.steps", "a pipeline needs at least one step")
    steps: Dict[str, Step] = {}
    for index, (name, body) in enumerate(raw.items()):
        key = f"pipeline.steps.{name}"
        if not STEP_NAME.match(str(name)):
            raise ConfigError(key, "a step name takes letters, digits, _ and - (it becomes part of its run id)")
        outputs = [str(o) for o in body.get("outputs") or []]
        for out in outputs:
            if not NAME.match(out):
                raise ConfigError(f"{key}.outputs", f"'{out}' is not a valid output name (letters, digits and _)")
        if len(set(outputs)) != len(outputs):
            raise ConfigError(f"{key}.outputs", "an output is named twice")
        inputs = {str(k): _input(f"{key}.inputs.{k}", str(k), v, cwd, dry_run)
                  for k, v in (body.get("inputs") or {}).items()}
        clash = sorted(set(inputs) & set(outputs))
        if clash:
            raise ConfigError(f"{key}.inputs.{clash[0]}", "is also the name of one of the step's outputs")
        overrides = body.get("overrides") or []
        if isinstance(overrides, str) or not all(isinstance(o, str) for o in overrides):
            raise ConfigError(f"{key}.overrides", "a list of overrides, as on the command line: [job=script, ...]")
        values = body.get("values") or {}  # a mapping: the pipeline's schema (StepConf) holds that
        steps[name] = Step(name=str(name), overrides=list(overrides), params=dict(body.get("params") or {}),
                           inputs=inputs, outputs=outputs, after=[str(a) for a in body.get("after") or []],
                           allow_reuse=bool(body.get("allow_reuse", True)), version=body.get("version"), index=index,
                           hash_paths=[str(h).strip("/") for h in body.get("hash_paths") or []],
                           controller=bool(body.get("controller", False)), values=dict(values))
    for step in steps.values():
        parents: List[str] = []
        for inp in step.inputs.values():
            if inp.step is None:
                continue
            where = f"pipeline.steps.{step.name}.inputs.{inp.name}"
            upstream = steps.get(inp.step)
            if upstream is None:
                raise ConfigError(where, f"no step '{inp.step}' in this pipeline", list(steps))
            if inp.output not in upstream.outputs:
                raise ConfigError(where, f"step '{inp.step}' has no output '{inp.output}'",
                                  upstream.outputs or ["(it declares no outputs)"])
            parents.append(inp.step)
        for name in step.after:
            if name not in steps:
                raise ConfigError(f"pipeline.steps.{step.name}.after", f"no step '{name}' in this pipeline", list(steps))
            parents.append(name)
        if step.name in parents:
            raise ConfigError(f"pipeline.steps.{step.name}", "a step cannot depend on itself")
        step.parents = sorted(set(parents), key=lambda n: steps[n].index)
    return _ordered(steps)


def _input(key: str, name: str, value: Any, cwd: str, dry_run: bool) -> Input:
    if not NAME.match(name):
        raise ConfigError(key, "not a valid input name (letters, digits and _): it is exported as "
                          f"AZUREML_DATAREFERENCE_{name}")
    mode, url = "content", None
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(INPUT_KEYS))
        if unknown:
            raise ConfigError(f"{key}.{unknown[0]}", "unknown key", INPUT_KEYS)
        mode = str(value.get("hash", "content"))
        if mode not in HASH_MODES:
            raise ConfigError(f"{key}.hash", f"'{mode}' is not a hash mode", HASH_MODES)
        url = value.get("url")
        value = value.get("path")
    if not isinstance(value, str) or not value:
        raise ConfigError(key, "an input is `STEP.outputs.NAME`, a path, or {path: ..., hash: content|mtime|none}")
    ref = REFERENCE.match(value)
    if ref and mode == "content" and not os.path.exists(os.path.join(cwd, value)):
        return Input(name, step=ref.group(1), output=ref.group(2))
    path = os.path.abspath(os.path.join(cwd, os.path.expanduser(value)))
    if url is not None and not os.path.exists(path) and not dry_run:
        raise ConfigError(key, f"'{value}' (downloaded from {url}) is not there: download it first")
    if url is None and not os.path.exists(path):
        raise ConfigError(key, f"'{value}' does not exist (an input is a path, or STEP.outputs.NAME)")
    return Input(name, path=path, hash=mode, url=None if url is None else str(url))


def _ordered(steps: Dict[str, Step]) -> List[Step]:
    """Parents before children, otherwise in the order written; a cycle is named step by step."""
    done: List[Step] = []
    placed: set = set()
    remaining = list(steps.values())
    while remaining:
        ready = [s for s in remaining if all(p in placed for p in s.parents)]
        if not ready:
            raise ConfigError("pipeline.steps", f"the steps form a cycle: {' -> '.join(_cycle(remaining, steps))}")
        for step in ready:
            done.append(step)
            placed.add(step.name)
        remaining = [s for s in remaining if s.name not in placed]
    return done


def _cycle(remaining: List[Step], steps: Dict[str, Step]) -> List[str]:
    left = {s.name for s in remaining}
    path = [remaining[0].name]
    while True:
        parent = next(p for p in steps[path[-1]].parents if p in left)
        if parent in path:
            loop = path[path.index(parent):] + [parent]
            return list(reversed(loop))
        path.append(parent)


def descendants(steps: List[Step], name: str) -> List[str]:
    """Every step that depends on `name`, directly or not."""
    found: List[str] = []
    for step in steps:  # parents come first, so one pass sees every chain
        if any(p == name or p in found for p in step.parents):
            found.append(step.name)
    return found
