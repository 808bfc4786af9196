"""azureml.data: OutputFileDatasetConfig (a step's output folder, read by later steps through
`.as_input()`), and the data references the core classes hand out."""
from __future__ import annotations

from typing import Any, Optional

from azureml.core._refuse_unknown import RefuseUnknown
from azureml.core.dataset import DatasetConsumptionConfig, FileDataset
from azureml.core.datastore import DataReference


class OutputFileDatasetConfig(RefuseUnknown):
    """A step's output folder: the step whose arguments (or outputs) name it writes it; a step whose
    arguments name `.as_input()` (or the object itself, once another step wrote it) reads it."""

    def __init__(self, name: Optional[str] = None, destination: Any = None, source: Optional[str] = None,
                 partition_format: Optional[str] = None) -> None:
        import uuid

        self.name = name or f"output_{uuid.uuid4().hex[:8]}"
        self.destination = destination

    def as_input(self, name: Optional[str] = None) -> PipelineInput:
        return PipelineInput(self, name)

    def as_mount(self) -> OutputFileDatasetConfig:
        return self

    def as_upload(self, overwrite: bool = False, source_globs: Any = None) -> OutputFileDatasetConfig:
        return self

    def register_on_complete(self, name: str, description: Optional[str] = None, tags: Any = None
                             ) -> OutputFileDatasetConfig:
        return self

    def read_delimited_files(self, *args: Any, **kwargs: Any) -> OutputFileDatasetConfig:
        return self

    read_parquet_files = read_delimited_files


class PipelineInput:
    """`output.as_input()`: the consuming side of a step's output."""

    def __init__(self, output: Any, name: Optional[str] = None) -> None:
        self.output = output
        self.name = name or output.name

    def as_download(self, path_on_compute: Optional[str] = None) -> PipelineInput:
        return self

    def as_mount(self) -> PipelineInput:
        return self


__all__ = ["DataReference", "DatasetConsumptionConfig", "FileDataset", "OutputFileDatasetConfig", "PipelineInput"]
