"""`Dataset.Tabular`: delimited or Parquet files on this machine (local paths, datastore paths, mapped URLs),
read with pandas (`to_pandas_dataframe`), or given whole to a ParallelRunStep, whose workers get them as
DataFrames of about `mini_batch_size` bytes each (mltrain's parallel job reads the files itself)."""
from __future__ import annotations

import glob
import os
from typing import Any, Dict, List, Optional

from azureml.core._refuse_unknown import RefuseUnknown
from azureml.exceptions import UserErrorException


class TabularDatasetConsumption:
    """`dataset.as_named_input(name)`: what a step lists in `inputs`."""

    def __init__(self, name: str, dataset: TabularDataset) -> None:
        self.name, self.dataset, self.mode = name, dataset, "direct"

    def _mltrain_path(self) -> str:
        return self.dataset._mltrain_path()


class TabularDataset(RefuseUnknown):
    def __init__(self, paths: List[str], parquet: bool, separator: str = ",", header: bool = True) -> None:
        self._paths, self._parquet, self._separator, self._header = paths, parquet, separator, header
        self.name: Optional[str] = None
        self.version: Optional[int] = None
        self.id: Optional[str] = None  # given when a pipeline submit consumes it (Azure saves it then)

    def _mltrain_path(self) -> str:
        """The folder (or file) a job reads: a pattern's folder, whose tables are the dataset's."""
        paths = [_static_part(p) for p in self._paths]
        return paths[0] if len(paths) == 1 else os.path.commonpath(paths)

    def _mltrain_definition(self) -> Dict[str, Any]:
        """The dataset as a step sees it: its files (patterns) relative to its input folder, and how they are read."""
        root = self._mltrain_path()
        return {"type": "tabular", "paths": [os.path.relpath(p, root) for p in self._paths], "parquet": self._parquet,
                "separator": self._separator, "header": self._header}

    def _files(self) -> List[str]:
        suffixes = (".parquet",) if self._parquet else (".csv", ".tsv", ".txt")
        out: List[str] = []
        for p in self._paths:
            if glob.has_magic(p):  # Azure's `folder/*.csv`
                out += sorted(glob.glob(p, recursive=True))
            elif os.path.isdir(p):
                out += sorted(os.path.join(d, f) for d, _, names in os.walk(p) for f in names
                              if f.lower().endswith(suffixes))
            else:
                out.append(p)
        return out

    def to_pandas_dataframe(self, on_error: str = "null", out_of_range_datetime: str = "null") -> Any:
        import pandas as pd  # the notebook's own: Azure's TabularDataset needs pandas too

        files = self._files()
        if not files:
            raise UserErrorException(f"Dataset.Tabular: no {'Parquet' if self._parquet else 'delimited'} files in "
                                     f"{', '.join(self._paths)}")
        frames = [pd.read_parquet(f) if self._parquet else
                  pd.read_csv(f, sep=self._separator, header=0 if self._header else None) for f in files]
        return pd.concat(frames, ignore_index=True)

    def take(self, count: int) -> TabularDataset:
        from azureml.core._bridge import unsupported

        unsupported("TabularDataset.take", "read it with to_pandas_dataframe() and use DataFrame.head")

    def as_named_input(self, name: str) -> TabularDatasetConsumption:
        return TabularDatasetConsumption(name, self)


def _static_part(path: str) -> str:
    if not glob.has_magic(path):
        return path
    parts = path.split(os.sep)
    fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    return os.sep.join(parts[:fixed]) or os.sep


def from_files(paths: List[str], parquet: bool, validate: bool, separator: str = ",", header: Any = True
               ) -> TabularDataset:
    if validate:
        missing = [p for p in paths if not (glob.glob(p, recursive=True) if glob.has_magic(p) else os.path.exists(p))]
        if missing:
            raise UserErrorException(f"Dataset.Tabular: {missing[0]} does not exist")
    has_header = header is True or str(header).split(".")[-1].upper() in ("ALL_FILES_HAVE_SAME_HEADERS",
                                                                            "FROM_FIRST_FILE", "COMBINE_ALL_FILES_HEADERS",
                                                                            "TRUE")
    return TabularDataset(paths, parquet, separator, has_header)
