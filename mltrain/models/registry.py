"""The model registry, with Azure ML's Model semantics on MLflow's Model Registry.

    model = mltrain.Model.register(model_name="digits", model_path="outputs/model", run="RUN")
    model = mltrain.Model("digits")             # the latest version; Model("digits", version=2)
    model.download(target_dir="./model", exist_ok=False)

Versions are integers, one more per registration of a name; tags can change, properties cannot.
A version's files are copied once into a content-addressed folder ($MLTRAIN_HOME/models/sha256-...),
which is the MLflow version's source; the run it came from may be deleted. mltrain keeps what Azure
has and MLflow does not (properties, the run, the framework) as MLflow tags under `mltrain.`.
"""
from __future__ import annotations

import difflib
import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Union

from mltrain.base.errors import MltrainError
from mltrain.base.home import mltrain_home
from mltrain.models import sqlite_registry
from mltrain.runs.mlflow_run import enabled
from mltrain.runs.record import find_run
from mltrain.tracking import mlflow_store as store

PROPERTY = "mltrain.property."
RUN, FRAMEWORK, PATH = "mltrain.run_id", "mltrain.framework", "mltrain.model_path"


class Model:
    """One registered version (Azure: azureml.core.Model)."""

    def __init__(self, name: str, version: Optional[int] = None) -> None:
        self._load(_version(name, version))

    def _load(self, mv: Any) -> None:
        tags = dict(mv.tags or {})
        self.name, self.version = mv.name, int(mv.version)
        self.description = mv.description or ""
        self.created_time = mv.creation_timestamp / 1000.0
        self.source = mv.source
        self.tags = {k: v for k, v in tags.items() if not k.startswith("mltrain.")}
        self.properties = {k[len(PROPERTY):]: v for k, v in tags.items() if k.startswith(PROPERTY)}
        self.run_id = tags.get(RUN)
        self.framework = tags.get(FRAMEWORK, "Custom")
        self.model_path = tags.get(PATH)

    @classmethod
    def _from(cls, mv: Any) -> Model:
        model = cls.__new__(cls)
        model._load(mv)
        return model

    # ------------------------------------------------------------------ Azure's class methods
    @classmethod
    def register(cls, model_name: str, model_path: Union[str, Path], run: Optional[str] = None,
                 tags: Optional[Dict[str, str]] = None, properties: Optional[Dict[str, str]] = None,
                 description: Optional[str] = None, runs_root: Optional[Union[str, Path]] = None) -> Model:
        """Register a file or folder as the next version of `model_name`. With `run`, `model_path` is a
        path inside that run (`outputs/model`); without, a path on this machine."""
        _check_name(model_name)
        source, record = _source(model_path, run, runs_root)
        run_id = record.id if record is not None else None
        blob = _store_files(source)
        all_tags = {str(k): str(v) for k, v in (tags or {}).items()}
        for key in all_tags:
            if key.startswith("mltrain."):
                raise MltrainError(f"tag '{key}': names starting with 'mltrain.' are mltrain's own")
        all_tags.update({PROPERTY + str(k): str(v) for k, v in (properties or {}).items()})
        all_tags.update({FRAMEWORK: framework_of(source), PATH: str(model_path)})
        if run_id:
            all_tags[RUN] = run_id
        with store.locked():
            mv = _register_direct(model_name, blob, record, all_tags, description)
        if mv is None:
            c = store.client()
            with store.locked():
                mv = _register_mlflow(c, model_name, blob, record, all_tags, description)
        return cls._from(mv)

    @classmethod
    def list(cls, name: Optional[str] = None, tags: Optional[Iterable[str]] = None,
             latest: bool = False) -> List[Model]:
        """Registered versions, newest first; `tags` are `key` or `key=value` filters, all required."""
        c = store.client()
        wanted = [t.split("=", 1) if "=" in t else [t, None] for t in (tags or [])]
        query = f"name = '{_quote(name)}'" if name else ""
        found = [cls._from(mv) for mv in _all(c.search_model_versions, query)]
        found = [m for m in found if all(k in m.tags and (v is None or m.tags[k] == v) for k, v in wanted)]
        found.sort(key=lambda m: (m.name, -m.version))
        if latest:
            seen, out = set(), []
            for m in found:
                if m.name not in seen:
                    seen.add(m.name)
                    out.append(m)
            return out
        return found

    # ------------------------------------------------------------------ one version
    def download(self, target_dir: Union[str, Path] = ".", exist_ok: bool = False) -> str:
        """Copy the version's files into target_dir; an existing file is an error unless exist_ok.
        Each file is written under a temporary name and renamed, so none is ever half-written."""
        source, target = Path(self.source), Path(target_dir).expanduser()
        if not source.exists():
            raise MltrainError(f"model {self.name}:{self.version}: its files are gone from {source}")
        files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
        rel = [Path(p.name) if source.is_file() else p.relative_to(source) for p in files]
        clash = [str(target / r) for r in rel if (target / r).exists()]
        if clash and not exist_ok:
            raise MltrainError(f"{clash[0]} already exists; download with exist_ok=True (--exist-ok) to overwrite")
        for src, r in zip(files, rel):
            out = target / r
            out.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.")
            os.close(fd)
            shutil.copyfile(src, tmp)
            os.replace(tmp, out)
        return str(target / rel[0]) if source.is_file() else str(target)

    def add_tags(self, tags: Dict[str, str]) -> None:
        c = store.client()
        for k, v in tags.items():
            c.set_model_version_tag(self.name, str(self.version), str(k), str(v))
            self.tags[str(k)] = str(v)

    def remove_tags(self, keys: Iterable[str]) -> None:
        c = store.client()
        for k in keys:
            c.delete_model_version_tag(self.name, str(self.version), str(k))
            self.tags.pop(str(k), None)

    def add_properties(self, properties: Dict[str, str]) -> None:
        """Properties can be added, never changed (Azure's rule)."""
        for k, v in properties.items():
            if str(k) in self.properties and self.properties[str(k)] != str(v):
                raise MltrainError(f"model {self.name}:{self.version}: property '{k}' is already "
                                   f"'{self.properties[str(k)]}'; properties cannot change (tags can)")
        c = store.client()
        for k, v in properties.items():
            c.set_model_version_tag(self.name, str(self.version), PROPERTY + str(k), str(v))
            self.properties[str(k)] = str(v)

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "version": self.version, "description": self.description, "tags": self.tags,
                "properties": self.properties, "run_id": self.run_id, "framework": self.framework,
                "model_path": self.model_path, "source": self.source, "created_time": self.created_time}

    def __repr__(self) -> str:
        return f"Model(name={self.name!r}, version={self.version})"


# ---------------------------------------------------------------------------------------- helpers
def framework_of(path: Path) -> str:
    """What a model's files are: ONNX when an .onnx file is there, PyTorch for .pt/.pth or a trainer's
    model directory, else Custom."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    suffixes = {p.suffix.lower() for p in files}
    if ".onnx" in suffixes:
        return "ONNX"
    if suffixes & {".pt", ".pth"} or any(p.name == "model_spec.json" for p in files):
        return "PyTorch"
    return "Custom"


def _check_name(name: str) -> None:
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$", str(name)):
        raise MltrainError(f"model name '{name}': letters, digits, '-', '_' and '.', starting with a letter or digit")


def _source(model_path: Union[str, Path], run: Optional[str], runs_root) -> tuple:
    if run is None:
        path = Path(model_path).expanduser()
        if not path.exists():
            raise MltrainError(f"model_path '{model_path}' does not exist")
        return path.resolve(), None
    record = find_run(Path(runs_root).expanduser() if runs_root else mltrain_home() / "runs", run)
    path = (record.dir / model_path).resolve()
    if not path.exists() or record.dir.resolve() not in (path, *path.parents):
        outputs = sorted(str(p.relative_to(record.dir)) for p in (record.dir / "outputs").rglob("*"))[:10]
        raise MltrainError(f"model_path '{model_path}' does not exist in run {record.id} (its outputs: "
                           f"{', '.join(outputs) or 'none'})")
    return path, record


def _mlflow_run(record: Any) -> Optional[str]:
    """The MLflow run of the registering run, or None when tracking is off (MLTRAIN_TRACKING=off). Only a
    run the mirror has not made in MLflow yet needs mltrain.tracking, kept off the direct path."""
    from mltrain.tracking import mirroring as tracking  # startup

    return tracking.mlflow_run_id(record) if enabled() else None


def _register_direct(name: str, blob: Path, record: Any, tags: Dict[str, str], description: Optional[str]):
    """The version written straight into the embedded store's registry tables (mltrain.models.sqlite_registry),
    or None where MLflow's client must write it: another store, a schema not checked, or a run the
    mirror has not made in MLflow yet (MLflow links a version to a run only when both are made)."""
    db = store.sqlite_path()
    if db is None:
        return None
    linked = None
    if record is not None and enabled():
        if record.doc.mlflow is None:
            return None
        linked = record.doc.mlflow.run_id
    return sqlite_registry.create_version(db, name, str(blob), linked, tags, description)


def _register_mlflow(c: Any, name: str, blob: Path, record: Any, tags: Dict[str, str], description: Optional[str]):
    """Through MLflow's client; the caller holds store.locked()."""
    from mlflow.exceptions import MlflowException  # heavy

    try:
        c.get_registered_model(name)
    except MlflowException:
        c.create_registered_model(name)
    # MLflow shows a version's source run only when the version is created with it: the run is
    # made in the store now if the mirror has not made it yet (a model registered by the job itself).
    linked = _mlflow_run(record) if record is not None else None
    return c.create_model_version(name, source=str(blob), run_id=linked, tags=tags, description=description)


def _store_files(source: Path) -> Path:
    """The files, copied once under their content digest (names and bytes): two registrations of the
    same files share one copy, and a registered version's files never change."""
    files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for p in files:
        digest.update((p.name if source.is_file() else str(p.relative_to(source))).encode() + b"\0")
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    root = store.blobs_dir()
    blob = root / f"sha256-{digest.hexdigest()}"
    if blob.exists():
        return blob / source.name if source.is_file() else blob
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".incoming-"))
    if source.is_file():
        shutil.copy2(source, tmp / source.name)
    else:
        shutil.copytree(source, tmp / "files", symlinks=False)
        inner = tmp / "files"
        for child in inner.iterdir():
            child.rename(tmp / child.name)
        inner.rmdir()
    try:
        tmp.rename(blob)
    except OSError:  # another registration of the same files won the race: theirs is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return blob / source.name if source.is_file() else blob


def _version(name: str, version: Optional[int]):
    from mlflow.exceptions import MlflowException  # heavy

    c = store.client()
    try:
        versions = list(_all(c.search_model_versions, f"name = '{_quote(name)}'"))
    except MlflowException as exc:
        raise MltrainError(f"model registry: {exc.message}") from None
    if not versions:
        names = sorted(m.name for m in _all(c.search_registered_models, None))
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f" (closest: {', '.join(close)})" if close else (f" (models: {', '.join(names[:10])})" if names else
                                                               " (the registry is empty)")
        raise MltrainError(f"no model '{name}' in the registry{hint}")
    numbers = sorted(int(v.version) for v in versions)
    if version is None:
        version = numbers[-1]
    match = [v for v in versions if int(v.version) == int(version)]
    if not match:
        raise MltrainError(f"model '{name}' has no version {version} (versions: {_ranges(numbers)})")
    return match[0]


def _all(search, query):
    """Every result of an MLflow search, page after page."""
    token = None
    while True:
        page = search(query, max_results=1000, page_token=token) if query is not None else \
            search(max_results=1000, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def _quote(text: str) -> str:
    return str(text).replace("'", "\\'")


def _ranges(numbers: List[int]) -> str:
    return f"{numbers[0]}..{numbers[-1]}" if numbers == list(range(numbers[0], numbers[-1] + 1)) else \
        ", ".join(map(str, numbers))
