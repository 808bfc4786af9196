"""`Run`: inside a job, `Run.get_context()` (metrics land in the mltrain run); in a control script, the
handle `Experiment.submit` returns (Azure's run history answered from the run's folder).

Both sides are one class, as in azureml-core: a run bound to a run folder. The control side goes
through mltrain's run handle (mltrain.python_api.handle.Run), so status, waiting, cancel and files mean what they
mean for `mltrain runs ...`.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from azureml.core._refuse_unknown import RefuseUnknown

from mltrain.runs import script_metrics as _metrics

#: mltrain's statuses are Azure's (NotStarted, Queued, Preparing, Running, Finalizing, Completed, Failed, Canceled)
TERMINAL = ("Completed", "Failed", "Canceled")


def _rank_experiment(run_dir: Path) -> Any:
    """The experiment a job's script runs in (`Run.get_context().experiment.workspace`, as Azure's scripts
    register models): the run's own, in the workspace whose config.json is in the script's folder or above
    it (the source folder is the workspace folder in Azure's examples), else this machine's workspace."""
    from azureml.core.experiment import Experiment
    from azureml.core.workspace import Workspace
    from azureml.exceptions import UserErrorException

    try:
        name = str(json.loads((run_dir / "run.json").read_text(encoding="utf-8")).get("experiment") or "mltrain")
    except (OSError, ValueError):
        name = "mltrain"
    try:
        workspace = Workspace.from_config()
    except UserErrorException:
        workspace = Workspace()
    return Experiment(workspace, name, _skip_name_validation=True)


class Run(RefuseUnknown):
    """A run of an experiment: `Run(experiment, run_id)`, `Run.get_context()`, or what submit returns."""

    def __init__(self, experiment: Any = None, run_id: Optional[str] = None, outputs: Any = None,
                 _run_dir: Optional[str] = None, _handle: Any = None, **kwargs: Any) -> None:
        self.experiment = experiment
        self._handle = _handle
        self._dir: Optional[Path] = Path(_run_dir) if _run_dir else None
        if run_id is not None and self._dir is None:
            from mltrain.python_api.handle import Run as Handle  # submission

            self._handle = Handle.get(run_id)
            self._dir = self._handle.run_dir
        if self._handle is not None and self._dir is None:
            self._dir = Path(self._handle.run_dir)
        self.id = self._dir.name if self._dir is not None else os.environ.get("MLTRAIN_RUN_ID", "OfflineRun")
        self._tags: Dict[str, str] = {}

    # ------------------------------------------------------------------ the training side
    @classmethod
    def get_context(cls, allow_offline: bool = True, used_for_context_manager: bool = False, **kwargs: Any) -> Run:
        run_dir = os.environ.get("MLTRAIN_RUN_DIR")
        if run_dir is None and not allow_offline:
            from azureml.exceptions import UserErrorException

            raise UserErrorException("Run.get_context(allow_offline=False) outside a run: start this script with "
                                     "mltrain (or submit it with Experiment.submit)")
        return cls(_run_dir=None) if run_dir is None else cls._context(run_dir)

    @classmethod
    def _context(cls, run_dir: str) -> Run:
        run = cls()
        run._dir = Path(run_dir)
        run.id = os.environ.get("MLTRAIN_RUN_ID", run._dir.name)
        run._in_rank = True
        run.experiment = _rank_experiment(run._dir)
        return run

    _in_rank = False

    @property
    def input_datasets(self) -> Dict[str, Any]:
        """The step's datasets by the name it consumes them under (DatasetConsumptionConfig, as_named_input):
        a TabularDataset or FileDataset, or the local path of a mounted or downloaded one."""
        from azureml.core.dataset import input_datasets

        return input_datasets(os.environ)

    def _log(self, record: Dict[str, Any]) -> None:
        if self._in_rank or self._dir is None:
            getattr(_metrics, record.pop("_fn"))(**record)
            return
        from mltrain.runs.metrics import MetricsWriter  # submission

        fn = record.pop("_fn")
        kind = {"log": "scalar", "log_list": "list", "log_row": "row", "log_table": "table"}[fn]
        value = record.get("value", record.get("values"))
        if fn == "log_row":
            value = record["columns"]
        MetricsWriter(str(self._dir / "metrics.jsonl")).write(
            {"name": record["name"], "value": value, "step": record.get("step"), "kind": kind})

    def log(self, name: str, value: Any, description: str = "", step: Optional[int] = None) -> None:
        self._log({"_fn": "log", "name": name, "value": value, "step": step, "description": description})

    def log_list(self, name: str, value: List[Any], description: str = "") -> None:
        self._log({"_fn": "log_list", "name": name, "values": list(value), "description": description})

    def log_row(self, name: str, description: Optional[str] = None, **kwargs: Any) -> None:
        if self._in_rank or self._dir is None:
            _metrics.log_row(name, description or "", **kwargs)
        else:
            self._log({"_fn": "log_row", "name": name, "columns": kwargs})

    def log_table(self, name: str, value: Dict[str, List[Any]], description: str = "") -> None:
        self._log({"_fn": "log_table", "name": name, "value": value, "description": description})

    def log_image(self, name: str, path: Optional[str] = None, plot: Any = None, description: str = "") -> None:
        """The image is kept with the run's outputs (outputs/images/NAME.png) and named in its metrics."""
        folder = self._outputs_folder() / "images"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{name}.png"
        if plot is not None:
            plot.savefig(str(target))
        elif path is not None:
            shutil.copyfile(path, target)
        else:
            raise ValueError("log_image needs path= or plot=")
        self._log({"_fn": "log", "name": name, "value": f"outputs/images/{name}.png", "step": None,
                   "description": description})

    def _outputs_folder(self) -> Path:
        if self._dir is not None:
            return self._dir / "outputs"
        return Path("outputs")

    def get_metrics(self, name: Optional[str] = None, recursive: bool = False, run_type: Any = None,
                    populate: bool = False) -> Dict[str, Any]:
        if self._in_rank or self._dir is None:
            return _metrics.get_metrics(name)
        from mltrain.runs.metrics import read_metrics, summarize  # submission

        return summarize(read_metrics(self._dir / "metrics.jsonl"), name)

    def set_tags(self, tags: Dict[str, str]) -> None:
        self._tags.update(tags)
        self._save_tags()

    def tag(self, key: str, value: Optional[str] = None) -> None:
        self._tags[key] = "" if value is None else str(value)
        self._save_tags()

    def get_tags(self) -> Dict[str, str]:
        if self._dir is not None and (self._dir / "tags.json").is_file():
            self._tags.update(json.loads((self._dir / "tags.json").read_text()))
        return dict(self._tags)

    @property
    def tags(self) -> Dict[str, str]:
        return self.get_tags()

    def _save_tags(self) -> None:
        if self._dir is not None and self._dir.is_dir():
            from mltrain.base.atomic import atomic_write  # submission

            atomic_write(self._dir / "tags.json", json.dumps({**self.get_tags_on_disk(), **self._tags}, indent=2))

    def get_tags_on_disk(self) -> Dict[str, str]:
        path = self._dir / "tags.json" if self._dir is not None else None
        return json.loads(path.read_text()) if path is not None and path.is_file() else {}

    def complete(self, _set_status: bool = True) -> None:
        """Nothing to do: mltrain records the final status when the ranks end."""

    def fail(self, error_details: Any = None, error_code: Any = None, _set_status: bool = True) -> None:
        raise SystemExit(f"run failed: {error_details or 'Run.fail()'}")

    @property
    def parent(self) -> Optional[Run]:
        return None

    # ------------------------------------------------------------------ the control side
    def _h(self) -> Any:
        if self._handle is None:
            if self._dir is None:
                from azureml.core._bridge import unsupported

                unsupported(f"Run({self.id}).{sys._getframe(1).f_code.co_name}", "this is an offline run; "
                            "submit the script with Experiment.submit to get a run with history")
            from mltrain.python_api.handle import Run as Handle  # submission

            self._handle = Handle(self._dir)
        return self._handle

    @property
    def display_name(self) -> str:
        return self.id

    @property
    def name(self) -> str:
        return self.id

    @property
    def status(self) -> str:
        return self.get_status()

    def get_status(self) -> str:
        return str(self._h().status)

    def _record(self) -> Dict[str, Any]:
        return dict(self._h().record)

    def get_details(self) -> Dict[str, Any]:
        record = self._record()
        phases = record.get("phases") or {}
        start, end = phases.get("Running"), max(phases.values()) if record.get("status") in TERMINAL else None
        details = {"runId": self.id, "target": record.get("compute"), "status": record.get("status"),
                   "startTimeUtc": _utc(start), "endTimeUtc": _utc(end),
                   "properties": {"mltrain.run_dir": str(self._dir), "mltrain.backend": record.get("backend")},
                   "inputDatasets": [], "outputDatasets": [],
                   "runDefinition": {"command": record.get("command"), "nodeCount": (record.get("world") or {}).get(
                       "node_count"), "environment": (record.get("environment") or {}).get("name")},
                   "logFiles": {str(p.relative_to(self._dir)): str(p) for p in sorted((self._dir / "logs").glob("*"))}
                   if self._dir is not None else {}}
        if record.get("error"):
            details["error"] = {"error": {"code": "UserError", "message": record["error"]}}
        return details

    def get_details_with_logs(self) -> Dict[str, Any]:
        return self.get_details()

    def wait_for_completion(self, show_output: bool = False, wait_post_processing: bool = False,
                            raise_on_error: bool = True) -> Dict[str, Any]:
        from azureml.exceptions import ActivityFailedException

        from mltrain.base.errors import MltrainError  # submission

        try:
            self._h().wait(show_output=show_output, raise_on_error=raise_on_error)
        except MltrainError as exc:  # a Failed or Canceled run: Azure raises ActivityFailedException
            raise ActivityFailedException(str(exc)) from None
        details = self.get_details()
        if show_output:
            print(f"\nExecution Summary\n=================\nRunId: {self.id}\nStatus: {details['status']}\n", flush=True)
        return details

    def cancel(self) -> None:
        self._h().cancel()

    def get_children(self, recursive: bool = False, tags: Any = None, properties: Any = None, type: Any = None,
                     status: Any = None, _rehydrate_runs: bool = True) -> Iterator[Run]:
        return iter(())

    def get_file_names(self) -> List[str]:
        return list(self._h().get_file_names())

    def download_file(self, name: str, output_file_path: Optional[str] = None, _validate_checksum: bool = False) -> None:
        from azureml.exceptions import UserErrorException

        from mltrain.base.errors import MltrainError  # submission

        try:
            self._h().download_file(name, output_file_path)
        except MltrainError as exc:
            raise UserErrorException(str(exc)) from None

    def download_files(self, prefix: Optional[str] = None, output_directory: Optional[str] = None,
                       output_paths: Optional[List[str]] = None, batch_size: int = 100, append_prefix: bool = True,
                       timeout_seconds: Optional[int] = None) -> None:
        target = Path(output_directory or ".")
        if not self._in_rank:  # a run on a remote cluster: the prefix's folder is brought from there first
            from azureml.exceptions import UserErrorException

            from mltrain.base.errors import MltrainError  # submission

            try:
                self._h().download(prefix.rstrip("/") if prefix else "outputs")
            except MltrainError as exc:
                raise UserErrorException(str(exc)) from None
        names = [n for n in self.get_file_names() if prefix is None or n.startswith(prefix)]
        for i, name in enumerate(names):
            if output_paths is not None:
                path = Path(output_paths[i])
            else:
                relative = name if append_prefix or prefix is None else os.path.relpath(name, prefix)
                path = target / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self._dir / name, path)  # type: ignore[operator]

    def upload_file(self, name: str, path_or_stream: str) -> None:
        target = self._dir / name  # type: ignore[operator]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path_or_stream, target)

    def register_model(self, model_name: str, model_path: Optional[str] = None, tags: Optional[Dict[str, str]] = None,
                       properties: Optional[Dict[str, str]] = None, model_framework: Optional[str] = None,
                       model_framework_version: Optional[str] = None, description: Optional[str] = None,
                       datasets: Any = None, sample_input_dataset: Any = None, sample_output_dataset: Any = None,
                       resource_configuration: Any = None, **kwargs: Any) -> Any:
        """Register a file or folder of this run ('outputs/model.pt') as the next version of model_name."""
        if self._in_rank:
            return self._register_from_rank(model_name, model_path or "outputs", tags, properties, description)
        from azureml.core.model import Model
        from azureml.exceptions import UserErrorException

        from mltrain.base.errors import MltrainError  # submission

        try:
            registered = self._h().register_model(model_name, model_path or "outputs", tags=tags,
                                                  properties=properties, description=description)
        except MltrainError as exc:
            raise UserErrorException(str(exc)) from None
        return Model._wrap(getattr(self.experiment, "workspace", None), registered)

    def _register_from_rank(self, model_name: str, model_path: str, tags: Optional[Dict[str, str]],
                            properties: Optional[Dict[str, str]], description: Optional[str]) -> Any:
        """From inside a job, through the `mltrain` command of the driver's interpreter, so a job whose own
        environment lacks MLflow registers all the same."""
        import subprocess
        from types import SimpleNamespace

        argv = [os.environ.get("MLTRAIN_PYTHON", sys.executable), "-m", "mltrain", "models", "register", model_name,
                "--run", str(self._dir), "--path", model_path]
        argv += [a for k, v in (tags or {}).items() for a in ("--tag", f"{k}={v}")]
        argv += [a for k, v in (properties or {}).items() for a in ("--property", f"{k}={v}")]
        argv += ["--description", description] if description else []
        done = subprocess.run([*argv, "--json"], capture_output=True, text=True)
        try:
            answer = json.loads(done.stdout)
        except ValueError:  # not mltrain's answer at all (an interpreter without mltrain, a crash)
            raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else
                               f"`mltrain models register` exited with {done.returncode}") from None
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return SimpleNamespace(**answer)

    def get_portal_url(self) -> str:
        return f"file://{self._dir}"

    def __repr__(self) -> str:
        name = getattr(self.experiment, "name", None) or "-"
        return f"Run(Experiment: {name},\nId: {self.id},\nType: azureml.scriptrun,\nStatus: {self._safe_status()})"

    def _safe_status(self) -> str:
        try:
            return self.get_status() if self._dir is not None else "Offline"
        except Exception:  # noqa: BLE001 - a repr must not raise
            return "Unknown"



def _utc(ts: Optional[float]) -> Optional[str]:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ts))


class ScriptRun(Run):
    pass
