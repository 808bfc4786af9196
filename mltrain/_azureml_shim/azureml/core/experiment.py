"""`Experiment`: runs grouped by name (mltrain's `experiment_name`), submitted with `submit(config)`."""
from __future__ import annotations

import re
from typing import Any, Dict, Iterator, List, Optional

from azureml.exceptions import UserErrorException

_NAME = re.compile(r"^[a-zA-Z0-9][\w-]{0,254}$")


class Experiment:
    def __init__(self, workspace: Any, name: str, _skip_name_validation: bool = False, _id: Any = None,
                 _archived_time: Any = None, _create_in_cloud: bool = True, _experiment_dto: Any = None,
                 **kwargs: Any) -> None:
        if not _skip_name_validation and not _NAME.match(str(name)):
            raise UserErrorException(f"Experiment name '{name}' is invalid: it must be 1-255 characters, start with "
                                     "a letter or a digit, and contain only letters, digits, '_' and '-'")
        self.workspace = workspace
        self.name = str(name)
        self.tags: Dict[str, str] = {}

    def submit(self, config: Any, tags: Optional[Dict[str, str]] = None, **kwargs: Any) -> Any:
        """Queue `config` (ScriptRunConfig, an estimator, HyperDriveConfig or a Pipeline); returns its run."""
        from azureml.core._bridge import origin

        from mltrain.launch import nesting  # submission

        nesting.refuse_in_a_rank()  # a job's code submitting itself again: before anything of it is written
        submit = getattr(config, "_submit", None)
        if submit is None:
            raise UserErrorException(f"Experiment.submit: {type(config).__name__} is not a run configuration "
                                     "(ScriptRunConfig, an estimator, HyperDriveConfig or Pipeline)")
        here = origin()
        if kwargs:
            return submit(self, tags, here, **kwargs)
        return submit(self, tags, here)

    def get_runs(self, type: Any = None, tags: Any = None, properties: Any = None,
                 include_children: bool = False) -> Iterator[Any]:
        """This experiment's runs, newest first."""
        from azureml.core.run import Run

        from mltrain.base.home import mltrain_home
        from mltrain.python_api.handle import Run as Handle  # submission
        from mltrain.runs.index import scan  # submission

        root = mltrain_home() / "runs"
        rows = [r for r in scan(root) if r.experiment == self.name and (include_children or r.sweep_dir is None)]
        for row in sorted(rows, key=lambda r: r.created, reverse=True):
            yield Run(self, _handle=Handle(root / row.folder))

    @staticmethod
    def list(workspace: Any, experiment_name: Optional[str] = None, view_type: str = "ActiveOnly",
             tags: Any = None) -> List[Experiment]:
        from mltrain.base.home import mltrain_home
        from mltrain.runs.index import scan  # submission

        names = sorted({row.experiment for row in scan(mltrain_home() / "runs")})
        return [Experiment(workspace, n, _skip_name_validation=True) for n in names
                if experiment_name is None or n == experiment_name]

    def archive(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"Experiment(Name: {self.name},\nWorkspace: {getattr(self.workspace, 'name', '-')})"
