"""`Dataset.File`: files on this machine. `from_files` takes local paths, datastore paths
(`(datastore, 'folder')`, `datastore.path('folder')`) or URLs mapped in `.mltrain/datastores.yaml`;
`as_download()`, `as_mount()` and `as_named_input(name)` give the script the folder's local path, as
Azure gives it the mounted or downloaded one. `register` keeps the dataset as the workspace's
`.mltrain/data/NAME.yaml` (the data asset file v2 job files read)."""
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
    def __init__(self, name: str, dataset: FileDataset, mode: str = "direct", path_on_compute: Optional[str] = None):
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
        self.id = None

    def _mltrain_path(self) -> str:
        if len(self._paths) == 1:
            return self._paths[0]
        return os.path.commonpath(self._paths)

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
