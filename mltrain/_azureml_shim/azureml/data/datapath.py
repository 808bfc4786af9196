"""azureml.data.datapath: a path in a datastore, passed to a pipeline as a PipelineParameter's value."""
from __future__ import annotations

import os
from typing import Any, Optional


class DataPath:
    def __init__(self, datastore: Any = None, path_on_datastore: Optional[str] = None, name: Optional[str] = None):
        self.datastore = datastore
        self.path_on_datastore = path_on_datastore or ""
        self.name = name

    def _mltrain_path(self) -> str:
        return str(self.datastore.root / self.path_on_datastore) if self.datastore is not None else \
            os.path.abspath(self.path_on_datastore)

    def create_data_reference(self, data_reference_name: Optional[str] = None, datapath_compute_binding: Any = None
                              ) -> Any:
        from azureml.core.datastore import DataReference

        return DataReference(self.datastore, data_reference_name, self.path_on_datastore)


class DataPathComputeBinding:
    """How a DataPath reaches the step (mount or download): here, always its local folder."""

    def __init__(self, mode: str = "mount", path_on_compute: Optional[str] = None, overwrite: bool = False) -> None:
        self.mode, self.path_on_compute, self.overwrite = mode, path_on_compute, overwrite


__all__ = ["DataPath", "DataPathComputeBinding"]
