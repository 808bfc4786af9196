"""`Dataset.File`: files on this machine. `from_files` takes local paths, datastore paths
(`(datastore, 'folder')`, `datastore.path('folder')`) or URLs mapped in `.mltrain/datastores.yaml`;
`as_download()`, `as_mount()` and `as_named_input(name)` give the script the folder's local path, as
Azure gives it the mounted or downloaded one. `register` keeps the dataset as the workspace's
`.mltrain/data/NAME.yaml` (the data asset file v2 job files read).

A dataset a pipeline step consumes (`DatasetConsumptionConfig(name, dataset or PipelineParameter)`,
`as_named_input(name)`) is a step input named `name`, and its definition (kind, files, how a table is read,
how the step gets it) is the step parameter `mltrain_dataset_<name>`: part of the step's reuse key, as Azure
keys on a dataset's definition, and what `Run.get_context().input_datasets` rebuilds the dataset from in the
step (`input_datasets` below)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional

from azureml.core._refuse_unknown import RefuseUnknown
from azureml.core.datastore import DataReference, Datastore, copy_tree
from azureml.exceptions import UserErrorException


def _local(path: Any) -> str:
    if isinstance(path, DataReference):
        return path._mltrain_path()
    if isinstance(path, tuple) and len(path) == 2 and isinstance(path[0], Datastore):
        return str(path[0].root / str(path[1]).lstrip("/"))
    text = str(path)
    if "://" in text and not text.startswith("file://"):
        mapped = _mapped(text)
        if mapped is not None:
            return mapped
        raise UserErrorException(f"'{text}' is not on this machine: download it, or map its prefix to a folder in "
                                 ".mltrain/datastores.yaml and pass the datastore path")
    return os.path.abspath(text[len("file://"):] if text.startswith("file://") else text)


def _mapped(uri: str) -> Optional[str]:
    """A URI's local copy through the nearest `.mltrain/datastores.yaml` (the map v2 job files use):
    the longest prefix it names wins."""
    import yaml  # submission

    here = Path.cwd()
    for folder in (here, *here.parents):
        table_file = folder / ".mltrain" / "datastores.yaml"
        if not table_file.is_file():
            continue
        table = yaml.safe_load(table_file.read_text(encoding="utf-8")) or {}
        best = max((str(p) for p in table if uri.startswith(str(p))), key=len, default=None)
        if best is None:
            return None
        root = folder / os.path.expanduser(str(table[best]))
        rest = uri[len(best):].lstrip("/")
        return str((root / rest).resolve() if rest else root.resolve())
    return None


class DatasetConsumptionConfig:
    """How a step consumes a dataset (or a PipelineParameter whose value is one): `direct` (the dataset object
    in `input_datasets`), `mount` or `download` (its local path there)."""

    def __init__(self, name: str, dataset: Any, mode: str = "direct", path_on_compute: Optional[str] = None):
        self.name, self.dataset, self.mode, self.path_on_compute = name, dataset, mode, path_on_compute

    def _mltrain_path(self) -> str:
        return self.dataset._mltrain_path()

    def as_download(self, path_on_compute: Optional[str] = None) -> DatasetConsumptionConfig:
        return DatasetConsumptionConfig(self.name, self.dataset, "download", path_on_compute)

    def as_mount(self, path_on_compute: Optional[str] = None) -> DatasetConsumptionConfig:
        return DatasetConsumptionConfig(self.name, self.dataset, "mount", path_on_compute)


class FileDataset(RefuseUnknown):
    def __init__(self, paths: List[str]) -> None:
        self._paths = paths
        self.name: Optional[str] = None
        self.version: Optional[int] = None
        self.id: Optional[str] = None  # given when a pipeline submit consumes it (Azure saves it then)

    def _mltrain_path(self) -> str:
        if len(self._paths) == 1:
            return self._paths[0]
        return os.path.commonpath(self._paths)

    def _mltrain_definition(self) -> Dict[str, Any]:
        """The dataset as a step sees it: its files relative to its input folder (`_mltrain_path`)."""
        root = self._mltrain_path()
        return {"type": "file", "paths": [os.path.relpath(p, root) for p in self._paths]}

    def to_path(self) -> List[str]:
        files: List[str] = []
        for p in self._paths:
            base = Path(p)
            files += (["/" + base.name] if base.is_file() else
                      ["/" + str(f.relative_to(base)) for f in sorted(base.rglob("*")) if f.is_file()])
        return files

    def download(self, target_path: Optional[str] = None, overwrite: bool = False, ignore_not_found: bool = False
                 ) -> List[str]:
        target = Path(target_path or ".")
        out: List[str] = []
        for p in self._paths:
            base = Path(p)
            if base.is_dir():
                copy_tree(base, target, overwrite, False)
                out += [str(target / f.relative_to(base)) for f in base.rglob("*") if f.is_file()]
            elif base.is_file():
                import shutil

                target.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(base, target / base.name)
                out.append(str(target / base.name))
            elif not ignore_not_found:
                raise UserErrorException(f"{p} does not exist")
        return out

    def mount(self, mount_point: Optional[str] = None, **kwargs: Any) -> Any:
        from azureml.core._bridge import unsupported

        unsupported("FileDataset.mount", "the dataset already is a local folder: "
                                         f"{self._mltrain_path()}")

    def as_named_input(self, name: str) -> DatasetConsumptionConfig:
        return DatasetConsumptionConfig(name, self)

    def as_download(self, path_on_compute: Optional[str] = None) -> DatasetConsumptionConfig:
        return DatasetConsumptionConfig("input", self, "download", path_on_compute)

    def as_mount(self, path_on_compute: Optional[str] = None) -> DatasetConsumptionConfig:
        return DatasetConsumptionConfig("input", self, "mount", path_on_compute)

    def register(self, workspace: Any, name: str, description: Optional[str] = None,
                 tags: Optional[Dict[str, str]] = None, create_new_version: bool = False) -> FileDataset:
        folder = Path(workspace.config_dir) / "data"
        folder.mkdir(parents=True, exist_ok=True)
        file = folder / f"{name}.yaml"
        if file.exists() and not create_new_version:
            raise UserErrorException(f"A dataset named '{name}' is already registered ({file}); pass "
                                     "create_new_version=True to replace it")
        lines = [f"# Azure ML dataset '{name}', registered by a v1 control script", f"name: {name}",
                 "type: uri_folder", f"path: {self._mltrain_path()}"]
        if description:
            lines.append(f"description: {description!r}")
        file.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.name = name
        return self


class _FileFactory:
    @staticmethod
    def from_files(path: Any, validate: bool = True, partition_format: Optional[str] = None,
                   is_file: bool = False) -> FileDataset:
        items = path if isinstance(path, list) else [path]
        paths = [_local(p) for p in items]
        if validate:
            missing = [p for p in paths if not os.path.exists(p)]
            if missing:
                raise UserErrorException(f"Dataset.File.from_files: {missing[0]} does not exist")
        return FileDataset(paths)

    @staticmethod
    def upload_directory(src_dir: str, target: Any, pattern: Optional[str] = None, overwrite: bool = False,
                         show_progress: bool = True) -> FileDataset:
        local = Path(_local(target))
        copy_tree(Path(src_dir), local, overwrite, show_progress)
        return FileDataset([str(local)])


class _TabularFactory:
    @staticmethod
    def from_delimited_files(path: Any, validate: bool = True, include_path: bool = False,
                             infer_column_types: bool = True, set_column_types: Any = None, separator: str = ",",
                             header: Any = True, partition_format: Optional[str] = None, **kwargs: Any) -> Any:
        from azureml.data.tabular_dataset import from_files

        items = path if isinstance(path, list) else [path]
        return from_files([_local(p) for p in items], False, validate, separator, header)

    @staticmethod
    def from_parquet_files(path: Any, validate: bool = True, include_path: bool = False,
                           set_column_types: Any = None, partition_format: Optional[str] = None) -> Any:
        from azureml.data.tabular_dataset import from_files

        items = path if isinstance(path, list) else [path]
        return from_files([_local(p) for p in items], True, validate)

    @staticmethod
    def from_sql_query(*args: Any, **kwargs: Any) -> Any:
        from azureml.core._bridge import unsupported

        unsupported("Dataset.Tabular.from_sql_query", "export the table to CSV or Parquet files and use "
                                                      "from_delimited_files or from_parquet_files")


class Dataset:
    File = _FileFactory
    Tabular = _TabularFactory

    @staticmethod
    def get_by_name(workspace: Any, name: str, version: str = "latest") -> FileDataset:
        import yaml  # submission

        file = Path(workspace.config_dir) / "data" / f"{name}.yaml"
        if not file.is_file():
            raise UserErrorException(f"Dataset '{name}' is not registered in this workspace (no {file})")
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
        dataset = FileDataset([_local(str(data.get("path", "")))])
        dataset.name = name
        return dataset

    @staticmethod
    def get_by_id(workspace: Any, id: str) -> Any:
        """A dataset a pipeline submit saved (Azure saves every dataset it submits, giving it its `id`)."""
        import json

        from mltrain.base.home import mltrain_home

        file = mltrain_home() / SAVED / f"{id}.json"
        if not str(id).startswith("dataset-") or not file.is_file():
            raise UserErrorException(f"Dataset id '{id}' is not known here: a dataset gets an id when a pipeline "
                                     "submit consumes it (dataset.id)")
        spec = json.loads(file.read_text(encoding="utf-8"))
        return _rebuilt(spec, spec["paths"])


#: The step parameter holding a consumed dataset's definition: `mltrain_dataset_<input name>`.
DEFINITION_PARAM = "mltrain_dataset_"


def consumed(mode: str, dataset: Any) -> str:
    """The JSON text of `DEFINITION_PARAM<name>`: the dataset's definition and how the step gets it."""
    import json

    return json.dumps({"mode": mode, **dataset._mltrain_definition()}, sort_keys=True)


class UnknownInputDataset(UserErrorException, KeyError):
    """`input_datasets[name]` for a name the step was not given: one line, still a KeyError to `except`."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InputDatasets(Dict[str, Any]):
    def __missing__(self, name: str) -> Any:
        given = ", ".join(f"'{n}'" for n in sorted(self)) or "none"
        raise UnknownInputDataset(f"Run.input_datasets has no '{name}': this step's datasets are {given} (the names "
                                  "given to DatasetConsumptionConfig(name, ...) or as_named_input(name))")


def input_datasets(environ: Any) -> InputDatasets:
    """A step's datasets by consumption name, as Azure gives them: the TabularDataset or FileDataset itself
    (direct), or the local path of a mounted or downloaded one. Each is rebuilt from its definition
    (AML_PARAMETER_mltrain_dataset_<name>) at its input folder (AZUREML_DATAREFERENCE_<name>)."""
    import json

    prefix = "AML_PARAMETER_" + DEFINITION_PARAM
    out = InputDatasets()
    for key, text in sorted(environ.items()):
        name = key[len(prefix):]
        root = environ.get("AZUREML_DATAREFERENCE_" + name) if key.startswith(prefix) else None
        if root is None:
            continue
        spec = json.loads(text)
        paths = [os.path.normpath(os.path.join(root, p)) for p in spec["paths"]]
        out[name] = root if spec["mode"] in ("mount", "download") else _rebuilt(spec, paths)
    return out


def _rebuilt(spec: Dict[str, Any], paths: List[str]) -> Any:
    from azureml.data.tabular_dataset import TabularDataset

    if spec["type"] == "tabular":
        return TabularDataset(paths, bool(spec["parquet"]), str(spec["separator"]), bool(spec["header"]))
    return FileDataset(paths)


#: Where a submit keeps the datasets it consumed, by id (under mltrain's home): `Dataset.get_by_id` reads them.
SAVED = "v1_datasets"


def save(dataset: Any) -> None:
    """Give a dataset a pipeline submit consumes its id, as Azure saves it: the digest of its definition
    (its files by absolute path), kept so that `Dataset.get_by_id` (and a REST call naming it) finds it."""
    import hashlib
    import json

    from mltrain.base.atomic import atomic_write  # submission
    from mltrain.base.home import mltrain_home

    spec = {**dataset._mltrain_definition(), "paths": [os.path.abspath(p) for p in dataset._paths]}
    text = json.dumps(spec, sort_keys=True)
    dataset_id = "dataset-" + hashlib.sha256(text.encode()).hexdigest()[:32]
    file = mltrain_home() / SAVED / f"{dataset_id}.json"
    if not file.is_file():
        file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(file, text)
    if dataset.id is None:
        dataset.id = dataset_id
