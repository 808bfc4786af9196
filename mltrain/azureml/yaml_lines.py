"""A job file read as plain data, with the line of every field, so that each refusal can name
`file.yml:14 search_space.C.type` as Azure's CLI names the field it rejects."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, Tuple

import yaml

from mltrain.base.errors import MltrainError

Path_ = Tuple[Any, ...]


class JobFileError(MltrainError):
    """A job file Azure would reject, or one mltrain cannot run: `file:line field.path: problem`."""

    def __init__(self, where: str, path: str, problem: str):
        self.where, self.path, self.problem = where, path, problem
        super().__init__(f"{where} {path}: {problem}" if path else f"{where} {problem}")


@dataclass
class JobFile:
    """One YAML file: its data, its folder (relative paths in it start there) and each field's line."""

    path: str
    data: Any
    lines: Dict[Path_, int] = field(default_factory=dict)
    #: where `data` sits in the file: () for the file itself, the field's path for a mapping inside it (an inline
    #: component), whose lines and refusals are then the file's own
    prefix: Tuple[Any, ...] = ()

    def inner(self, path: Path_, data: Any) -> JobFile:
        """The mapping at `path` of this file as a file of its own, its lines and refusals this file's."""
        return JobFile(self.path, data, self.lines, self.prefix + tuple(path))

    @property
    def folder(self) -> str:
        return os.path.dirname(os.path.abspath(self.path))

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def line(self, path: Path_) -> int:
        """The line of a field, else of the nearest enclosing field that has one."""
        path = self.prefix + tuple(path)
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path, 1)

    def error(self, path: Path_, problem: str) -> JobFileError:
        return JobFileError(f"{self.name}:{self.line(path)}", dotted(self.prefix + tuple(path)), problem)


def dotted(path: Path_) -> str:
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path).replace(".[", "[")


def load(path: str) -> JobFile:
    """Read a job or component file; a missing file or invalid YAML is one JobFileError line."""

    name = os.path.basename(path)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise JobFileError(f"{name}:", "", f"no such file: {path}") from None
    except IsADirectoryError:
        raise JobFileError(f"{name}:", "", f"{path} is a folder; name the job's YAML file") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}" if mark is not None else name
        raise JobFileError(where, "", f"invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    finally:
        loader.dispose()
    lines: Dict[Path_, int] = {}
    if node is not None:
        _walk(node, (), lines)
    # realpath: a registered name may be a link to the file, and Azure reads paths relative to the file itself
    return JobFile(os.path.realpath(path), data, lines)


def _walk(node: Any, path: Path_, lines: Dict[Path_, int]) -> None:

    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = path + (key.value,)
            lines[child] = key.start_mark.line + 1
            _walk(value, child, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, value in enumerate(node.value):
            _walk(value, path + (index,), lines)
