"""`Datastore`: a named folder. `azureml://datastores/NAME/paths/` is mapped in the workspace's
`.mltrain/datastores.yaml` (the map v2 job files use); a datastore it does not map is the folder
`$MLTRAIN_HOME/datastores/NAME`. `upload` copies files into it."""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

from azureml.core._refuse_unknown import RefuseUnknown
from azureml.exceptions import UserErrorException


class Datastore(RefuseUnknown):
    DEFAULT = "workspaceblobstore"

    def __init__(self, workspace: Any, name: Optional[str] = None) -> None:
        self.workspace = workspace
        self.name = name or self.DEFAULT
        self.datastore_type = "AzureBlob"
        self.container_name = self.name

    @property
    def root(self) -> Path:
        """The local folder this datastore is."""
        import yaml  # submission

        prefix = f"azureml://datastores/{self.name}/paths/"
        file = Path(self.workspace.config_dir) / "datastores.yaml" if self.workspace is not None else None
        if file is not None and file.is_file():
            table = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
            for key, folder in table.items():
                if str(key).rstrip("/") + "/" == prefix:
                    return (file.parent.parent / os.path.expanduser(str(folder))).resolve()
        from mltrain.base.home import mltrain_home

        return mltrain_home() / "datastores" / self.name

    @staticmethod
    def get(workspace: Any, datastore_name: str) -> Datastore:
        return Datastore(workspace, datastore_name)

    @staticmethod
    def list(workspace: Any) -> List[Datastore]:
        from mltrain.base.home import mltrain_home

        names = {Datastore.DEFAULT}
        folder = mltrain_home() / "datastores"
        if folder.is_dir():
            names.update(p.name for p in folder.iterdir() if p.is_dir())
        return [Datastore(workspace, n) for n in sorted(names)]

    @staticmethod
    def register_azure_blob_container(workspace: Any, datastore_name: str, container_name: str = "",
                                      account_name: str = "", **kwargs: Any) -> Datastore:
        """The datastore is a folder here: map it in .mltrain/datastores.yaml to use an existing one."""
        return Datastore(workspace, datastore_name)

    def upload(self, src_dir: str, target_path: Optional[str] = None, overwrite: bool = False,
               show_progress: bool = True) -> DataReference:
        target = self.root / (target_path or "")
        copy_tree(Path(src_dir), target, overwrite, show_progress)
        return DataReference(self, path_on_datastore=target_path or "")

    def upload_files(self, files: List[str], relative_root: Optional[str] = None, target_path: Optional[str] = None,
                     overwrite: bool = False, show_progress: bool = True) -> DataReference:
        base = Path(relative_root) if relative_root else None
        for name in files:
            source = Path(name)
            rel = source.relative_to(base) if base else Path(source.name)
            out = self.root / (target_path or "") / rel
            if out.exists() and not overwrite:
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, out)
            if show_progress:
                print(f"Uploaded {source}")
        return DataReference(self, path_on_datastore=target_path or "")

    def path(self, path: Optional[str] = None, data_reference_name: Optional[str] = None) -> DataReference:
        return DataReference(self, data_reference_name, path or "")

    def download(self, target_path: str, prefix: Optional[str] = None, overwrite: bool = False,
                 show_progress: bool = True) -> Optional[int]:
        """The datastore's files whose path starts with `prefix`, copied under target_path at the same relative
        paths (Azure's AzureBlobDatastore.download); how many were copied."""
        files = (p for p in sorted(self.root.rglob("*")) if p.is_file())
        chosen = (f for f in files if not prefix or f.relative_to(self.root).as_posix().startswith(prefix))
        count = _copy_files(((f, Path(target_path) / f.relative_to(self.root)) for f in chosen), overwrite)
        if show_progress:
            print(f"Downloaded {count} files to {target_path}")
        return count

    def as_mount(self) -> DataReference:
        return DataReference(self)

    def as_download(self, path_on_compute: Optional[str] = None) -> DataReference:
        return DataReference(self)

    def __repr__(self) -> str:
        return f"Datastore(name={self.name!r}, folder={str(self.root)!r})"


def copy_tree(source: Path, target: Path, overwrite: bool, show_progress: bool) -> int:
    if not source.is_dir():
        raise UserErrorException(f"src_dir '{source}' is not a folder")
    files = (p for p in sorted(source.rglob("*")) if p.is_file())
    count = _copy_files(((f, target / f.relative_to(source)) for f in files), overwrite)
    if show_progress:
        print(f"Uploaded {count} files to {target}")
    return count


def _copy_files(pairs: Iterable[Tuple[Path, Path]], overwrite: bool) -> int:
    """Copy each (file, destination), keeping a destination that exists unless `overwrite`; how many were copied."""
    count = 0
    for file, out in pairs:
        if out.exists() and not overwrite:
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, out)
        count += 1
    return count


class DataReference(RefuseUnknown):
    """A path in a datastore (azureml.data.data_reference.DataReference): the script receives its folder."""

    def __init__(self, datastore: Datastore, data_reference_name: Optional[str] = None,
                 path_on_datastore: Optional[str] = None, mode: str = "mount", path_on_compute: Optional[str] = None,
                 overwrite: bool = False) -> None:  # Azure's order
        self.datastore = datastore
        self.path_on_datastore = path_on_datastore or ""
        self.data_reference_name = data_reference_name or datastore.name
        self.mode = mode

    def as_mount(self) -> DataReference:
        return DataReference(self.datastore, self.data_reference_name, self.path_on_datastore, "mount")

    def as_download(self, path_on_compute: Optional[str] = None, overwrite: bool = False) -> DataReference:
        return DataReference(self.datastore, self.data_reference_name, self.path_on_datastore, "download")

    def path(self, path: Optional[str] = None, data_reference_name: Optional[str] = None) -> DataReference:
        return DataReference(self.datastore, data_reference_name, os.path.join(self.path_on_datastore, path or ""))

    def _mltrain_path(self) -> str:
        return str(self.datastore.root / self.path_on_datastore)

    @property
    def _path_on_datastore(self) -> str:  # read by Azure's HyperDriveStep notebook to open a downloaded file
        return self.path_on_datastore

    def download(self, local_path: str, overwrite: bool = False, show_progress: bool = True) -> int:
        """The folder's files (or the one file a step wrote there) under local_path/path_on_datastore, as Azure's
        PortDataReference.download puts them; how many files were downloaded."""
        source, target = Path(self._mltrain_path()), Path(local_path) / self.path_on_datastore
        if source.is_file():
            count = _copy_files([(source, target)], overwrite)
            if show_progress:
                print(f"Downloaded {count} files to {target}")
            return count
        return copy_tree(source, target, overwrite, show_progress)

    def __str__(self) -> str:
        return self._mltrain_path()

    def to_config(self) -> Dict[str, Any]:
        return {"datastore": self.datastore.name, "path": self.path_on_datastore, "mode": self.mode}
