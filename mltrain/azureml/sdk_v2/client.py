"""`azure.ai.ml.MLClient` on mltrain: the notebook's `MLClient(...)` or `MLClient.from_config(...)` gives
this client when mltrain is selected (mltrain.azureml.sdk_v2.hook), and its `jobs` run here.

    ml_client = MLClient(DefaultAzureCredential(), SUBSCRIPTION, RESOURCE_GROUP, WORKSPACE)  # no token asked
    returned = ml_client.jobs.create_or_update(command_job, experiment_name="exp")
    ml_client.jobs.stream(returned.name)            # rank 0's output to the end; a failed job raises

Entities are azure-ai-ml's own (the user built them with its builders); what comes back is the submitted
job entity with mltrain's run name, status and a `studio_url` on `mltrain ui`. Errors are azure-ai-ml's
exception types carrying mltrain's one line. Its assets are sdk_v2.assets', its online endpoints and deployments
sdk_v2.online's (servers on this machine, mltrain.endpoints).
"""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, Optional

from mltrain.azureml.sdk_v2 import assets, azure_ai_ml_internals, online, operations
from mltrain.azureml.sdk_v2 import submit as submission
from mltrain.base.errors import MltrainError
from mltrain.base.home import mltrain_home
from mltrain.base.processes import pid_alive
from mltrain.launch import nesting
from mltrain.python_api.handle import Run
from mltrain.runs.waiting import wait_until

_Done = operations.Done

UI_URL_ENV = "MLTRAIN_UI_URL"
TERMINAL = ("Completed", "Failed", "Canceled")


def _azure() -> Any:
    from mltrain.azureml.sdk_v2 import require_azure  # optional

    return require_azure()


class MLClient:
    """Azure's workspace client, on mltrain: the credential is kept and never asked for a token."""

    def __init__(self, credential: Any = None, subscription_id: Optional[str] = None,
                 resource_group_name: Optional[str] = None, workspace_name: Optional[str] = None,
                 registry_name: Optional[str] = None, **kwargs: Any) -> None:
        self._credential = credential
        self.subscription_id = subscription_id
        self.resource_group_name = resource_group_name
        self.workspace_name = workspace_name
        self._registry_name = registry_name
        self.jobs = JobOperations(self)
        self.compute = operations.ComputeOperations()
        self.workspaces = self._workspaces = operations.WorkspaceOperations(self)
        self.models: Any = assets.ModelOperations()
        self.data: Any = assets.DataOperations()
        self.components: Any = assets.ComponentOperations()
        self.environments: Any = assets.EnvironmentOperations()
        self.online_endpoints = online.OnlineEndpointOperations()
        self.online_deployments = online.OnlineDeploymentOperations()
        self.batch_endpoints = online.BatchOperations("batch_endpoints")
        self.batch_deployments = online.BatchOperations("batch_deployments")
        if registry_name is not None:  # Azure's registries (models, components, environments shared across
            # workspaces) have no counterpart here: every call on them is one line naming it
            for kind in ("models", "data", "components", "environments"):
                setattr(self, kind, operations.Registry(registry_name, kind))

    @classmethod
    def from_config(cls, credential: Any = None, *, path: Optional[str] = None, file_name: Optional[str] = None,
                    **kwargs: Any) -> MLClient:
        """The workspace named by config.json (Azure's search: the folder given, `.azureml/`, the folders
        above); with none found, a client of this machine's mltrain."""
        found = _config_json(path, file_name)
        values = json.loads(found.read_text(encoding="utf-8")) if found else {}
        return cls(credential, values.get("subscription_id"), values.get("resource_group"),
                   values.get("workspace_name"), **kwargs)

    def create_or_update(self, entity: Any, **kwargs: Any) -> Any:
        kind = type(entity).__name__
        if kind in ("Command", "Sweep", "CommandJob", "SweepJob", "PipelineJob"):
            return self.jobs.create_or_update(entity, **kwargs)
        if self._online(entity) is not None:
            done = self.begin_create_or_update(entity, **kwargs)
            return done.result() if isinstance(done, _Done) else done  # local=True: the entity itself
        if any(cls.__name__ == "Compute" for cls in type(entity).__mro__):  # AmlCompute, KubernetesCompute, ...
            return self.compute.begin_create_or_update(entity).result()
        by_kind = {"Model": self.models, "Data": self.data, "Environment": self.environments}
        operations = by_kind.get(kind) or (self.components if kind.endswith("Component") else None)
        if operations is None:
            raise _azure().ValidationException(
                message=f"MLClient.create_or_update({kind}): mltrain's client makes jobs, models, data, components, "
                        "environments, computes (mapped), online endpoints and deployments",
                no_personal_data_message="unsupported entity")
        return operations.create_or_update(entity, **kwargs)

    def begin_create_or_update(self, entity: Any, **kwargs: Any) -> Any:
        online_operations = self._online(entity)
        if online_operations is not None:
            return online_operations.begin_create_or_update(entity, **kwargs)
        return _Done(self.create_or_update(entity, **kwargs))

    def _online(self, entity: Any) -> Any:
        """The operations of an online endpoint or deployment entity; a batch one is refused in one line."""
        kinds = {cls.__name__ for cls in type(entity).__mro__}
        if kinds & {"BatchEndpoint", "BatchDeployment"}:
            raise online.refuse_batch(entity)
        if "OnlineEndpoint" in kinds:
            return self.online_endpoints
        if "OnlineDeployment" in kinds:
            return self.online_deployments
        return None

    def __repr__(self) -> str:
        return f"MLClient(mltrain, workspace={self.workspace_name!r}, home={str(mltrain_home())!r})"


def _config_json(path: Optional[str], file_name: Optional[str]) -> Optional[Path]:
    names = [file_name] if file_name else ["config.json"]
    start = Path(path or os.getcwd()).expanduser()
    if start.is_file():
        return start
    for folder in (start, *start.parents):
        for name in names:
            for candidate in (folder / name, folder / ".azureml" / name):
                if candidate.is_file():
                    return candidate
    return None


class JobOperations:
    def __init__(self, client: MLClient) -> None:
        self._client = client
        self._entities: Dict[str, Any] = {}
        self._submitted: Dict[str, submission.Submitted] = {}

    # ------------------------------------------------------------------ submit
    def create_or_update(self, job: Any, *, description: Optional[str] = None, compute: Optional[str] = None,
                         tags: Optional[Dict[str, str]] = None, experiment_name: Optional[str] = None,
                         skip_validation: bool = False, **kwargs: Any) -> Any:
        nesting.refuse_in_a_rank()  # before the job's folder is written (mltrain.launch.nesting)
        azure = _azure()
        try:
            done = submission.submit(job, experiment_name=experiment_name, compute=compute)
        except MltrainError as exc:
            raise azure.ValidationException(message=str(exc), no_personal_data_message="mltrain refused the job",
                                            target=azure.ErrorTarget.JOB) from None
        entity = submission.job_entity(job)
        entity.name = done.name
        if description is not None:
            entity.description = description
        if tags:
            entity.tags = {**(entity.tags or {}), **tags}
        self._submitted[done.name] = done
        self._entities[done.name] = entity
        return self._with_state(entity, done.name)

    # ------------------------------------------------------------------ look
    def get(self, name: str) -> Any:
        _named(name, "get")
        entity = self._entities.get(name)
        if entity is None:
            record = submission.find(name)
            if record is not None:
                entity = _reloaded(record)
            else:
                entity = self._plain_run(name)
            entity.name = name
        return self._with_state(entity, name)

    def list(self, parent_job_name: Optional[str] = None, **kwargs: Any) -> Iterator[Any]:
        """The jobs submitted through this client (newest first); with parent_job_name, a pipeline's steps."""
        if parent_job_name is not None:
            prefix = parent_job_name + "."
            for run_dir in sorted((mltrain_home() / "runs").glob(prefix + "*")):
                yield self.get(run_dir.name)
            return
        root = submission.sdk_root()
        folders = sorted(root.glob(f"*/{submission.RECORD}"), key=lambda p: p.stat().st_mtime, reverse=True) \
            if root.is_dir() else []
        for path in folders:
            yield self.get(path.parent.name)

    def status(self, name: str) -> str:
        record = submission.find(name)
        if record is None or record["kind"] == "command":
            return str(self._run(name, record).status)
        outcome = submission.outcome(record)
        if outcome is not None:
            return str(outcome["status"])
        pid = record.get("driver_pid")
        return "Running" if pid is None or _alive(int(pid)) else "Failed"

    # ------------------------------------------------------------------ follow
    def stream(self, name: str) -> None:
        """Rank 0's output (a sweep's or pipeline's: its engine's) until the job ends; a job that did not
        complete raises azure-ai-ml's JobException, as Azure's stream does."""
        azure = _azure()
        _named(name, "stream")
        record = submission.find(name)
        print(f"RunId: {name}\nWeb View: {self._studio_url(name)}\n\nStreaming logs (mltrain):\n", flush=True)
        if record is None or record["kind"] == "command":
            from mltrain.base.errors import RunCanceled, RunFailed  # startup

            try:
                status = self._run(name, record).wait(show_output=True, raise_on_error=True)
            except (RunFailed, RunCanceled) as exc:
                raise _job_exception(azure, name, str(exc)) from None
        else:
            status = self._follow_driver(name, record)
            if status != "Completed":
                outcome = submission.outcome(record) or {}
                raise _job_exception(azure, name, str(outcome.get("error") or f"{record['kind']} {name} {status}"))
        print(f"\nExecution Summary\n=================\nRunId: {name}\nStatus: {status}\n", flush=True)

    def _follow_driver(self, name: str, record: Dict[str, Any]) -> str:
        log = Path(record["driver"]) / "driver.log"
        offset = 0

        def copied_to_the_end() -> bool:
            """The driver's new output printed; True once the driver has ended (and all it wrote is out)."""
            nonlocal offset
            ended = submission.outcome(record) is not None or self.status(name) in TERMINAL
            if log.is_file():
                with open(log, "rb") as handle:
                    handle.seek(offset)
                    chunk = handle.read()
                offset += len(chunk)
                if chunk:
                    sys.stdout.write(chunk.decode("utf-8", "replace"))
                    sys.stdout.flush()
            return ended

        wait_until(copied_to_the_end, poll=0.2)
        return self.status(name)

    # ------------------------------------------------------------------ act
    def cancel(self, name: str, **kwargs: Any) -> None:
        _named(name, "cancel")
        record = submission.find(name)
        if record is None or record["kind"] == "command":
            run = self._run(name, record)
            # A driver signalled before it has started its run dies without recording Canceled (it sets its
            # handler on starting): wait for it to start first.
            wait_until(lambda: run.status != "NotStarted", timeout=30, poll=0.05)
            run.cancel()
            return
        pid = record.get("driver_pid")
        if pid is None or submission.outcome(record) is not None or not _alive(int(pid)):
            return
        os.kill(int(pid), signal.SIGTERM)  # the driver cancels what it started, then writes its outcome
        wait_until(lambda: submission.outcome(record) is not None or not _alive(int(pid)), timeout=60, poll=0.1)

    def begin_cancel(self, name: str, **kwargs: Any) -> _Done:
        self.cancel(name)
        return _Done()

    def download(self, name: str, *, download_path: str = ".", output_name: Optional[str] = None,
                 all: bool = False) -> None:
        """A job's outputs (`output_name`: one named output; else its default artifacts, `all`: both) copied
        under download_path as Azure lays them out: `named-outputs/NAME/`, `artifacts/`."""
        import shutil  # startup

        _named(name, "download")
        record = submission.find(name)
        run_dir = Path(record["run_dir"]) if record and record.get("run_dir") else self._run(name, record).run_dir
        target = Path(download_path)
        outputs = run_dir / "outputs"
        if record is None or record["kind"] != "pipeline":  # a run on a remote cluster: its outputs come now
            Run(run_dir).download("outputs")
        if output_name is not None:
            source = outputs / output_name
            if record is not None and record["kind"] == "pipeline":
                source = _pipeline_output(record, run_dir, output_name) or source
            if not source.exists():
                known = sorted(p.name for p in outputs.iterdir()) if outputs.is_dir() else []
                raise _azure().MlException(message=f"job {name} has no output '{output_name}' (outputs: "
                                                   f"{', '.join(known) or 'none'})", no_personal_data_message="no output")
            shutil.copytree(source, target / "named-outputs" / output_name, dirs_exist_ok=True)
        if output_name is None or all:
            shutil.copytree(run_dir / "logs", target / "artifacts" / "logs", dirs_exist_ok=True) \
                if (run_dir / "logs").is_dir() else None
            if outputs.is_dir():
                shutil.copytree(outputs, target / "artifacts" / "outputs", dirs_exist_ok=True)

    # ------------------------------------------------------------------ helpers
    def _run(self, name: str, record: Optional[Dict[str, Any]]) -> Any:
        done = self._submitted.get(name)
        if done is not None and done.run is not None:
            return done.run
        if record is not None and record.get("run_dir"):
            return Run(record["run_dir"])
        try:
            return Run.get(name)
        except MltrainError as exc:
            raise _azure().ResourceNotFoundError(f"Job {name} not found ({exc})") from None

    def _plain_run(self, name: str) -> Any:
        """A run mltrain made without this client (`mltrain ...`, a pipeline's step), as a CommandJob."""
        run = self._run(name, None)
        doc = run.record
        return _azure().CommandJob(name=name, display_name=name, experiment_name=doc.get("experiment_name"),
                                   command=str(doc.get("command") or "mltrain"))

    def _with_state(self, entity: Any, name: str) -> Any:
        azure_ai_ml_internals.set_status(entity, self.status(name))
        record = submission.find(name)
        if record is not None and record["kind"] == "sweep":
            best = _best_child(Path(record["sweep_dir"]))
            if best:  # Azure's sweep job says its best trial in its properties once one has scored
                entity.properties = {**(entity.properties or {}), **best}
        try:
            from azure.ai.ml.entities import JobService  # optional

            entity.services = {"Studio": JobService(endpoint=self._studio_url(name))}
        except Exception:  # noqa: BLE001 - an entity without services keeps Azure's own studio_url
            pass
        return entity

    def _studio_url(self, name: str) -> str:
        """`mltrain ui`'s page of the run (MLflow's run page) once the mirror has copied it; before that, the
        UI's experiments page filtered by the run's name."""
        base = os.environ.get(UI_URL_ENV, "http://127.0.0.1:5000").rstrip("/")
        record = submission.find(name)
        run_dir = Path(record["run_dir"]) if record and record.get("run_dir") else mltrain_home() / "runs" / name
        try:
            from mltrain.runs.record import RunRecord  # startup

            mark = RunRecord.load(run_dir).doc.mlflow if (run_dir / "run.json").is_file() else None
        except MltrainError:
            mark = None
        if mark is not None:
            return f"{base}/#/runs/{mark.run_id}"
        return f"{base}/#/experiments?searchFilter=attributes.run_name%3D%22{name}%22"


def _best_child(sweep_dir: Path) -> Dict[str, str]:
    """{best_child_run_id, score} of a sweep's sweep.json (Azure's SweepJob.properties keys), or {} before a
    trial has logged the primary metric."""
    from mltrain.sweeps import results  # startup

    if not (sweep_dir / results.SWEEP_FILE).is_file():
        return {}  # not started yet
    try:
        doc = results.load(str(sweep_dir), sweep_dir.parent.parent)
    except MltrainError:
        return {}  # being written: the next look reads it
    if not doc.best_run_id:
        return {}
    return {"best_child_run_id": str(doc.best_run_id), "score": str(doc.best_value)}


def _reloaded(record: Dict[str, Any]) -> Any:
    """A job submitted by another process, from its job file; a file Azure's own loader refuses (it asks
    for fields mltrain does not need, such as a command job's environment) as a bare entity of its type."""
    import yaml  # startup

    name = record["name"]
    file = submission.sdk_root() / name / f"{name}.yml"
    try:
        return _azure().load_job(str(file))
    except Exception:  # noqa: BLE001 - any refusal of Azure's loader: the job still exists here
        from azure.ai.ml.entities import CommandJob, PipelineJob  # optional
        from azure.ai.ml.sweep import SweepJob  # optional

        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
        common = {"name": name, "display_name": data.get("display_name"), "experiment_name": data.get("experiment_name")}
        if record["kind"] == "pipeline":
            return PipelineJob(**common)
        if record["kind"] == "sweep":
            return SweepJob(**common)
        return CommandJob(command=str(data.get("command") or ""), **common)


def _pipeline_output(record: Dict[str, Any], run_dir: Path, output: str) -> Optional[Path]:
    """Where a pipeline's output is: the output of the step bound to `${{parent.outputs.NAME}}`."""
    import yaml  # startup

    data = yaml.safe_load((submission.sdk_root() / record["name"] / f"{record['name']}.yml").read_text(encoding="utf-8"))
    binding = f"${{{{parent.outputs.{output}}}}}"
    for step, body in (data.get("jobs") or {}).items():
        for port, value in ((body or {}).get("outputs") or {}).items():
            if value == binding:
                return run_dir.parent / f"{run_dir.name}.{step}" / "outputs" / str(port)
    return None


def _alive(pid: int) -> bool:
    try:  # a driver this process forked and that has ended is reaped here, then reads as ended
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    return pid_alive(pid)


def _named(name: Any, call: str) -> None:
    """A job name, or one line: a notebook whose create_or_update was refused goes on with the unsubmitted
    entity, whose name is None."""
    if not isinstance(name, str) or not name:
        raise _azure().ValidationException(
            message=f"jobs.{call}({name!r}): a job name is needed; this job was never submitted "
                    "(its create_or_update failed or was not run)", no_personal_data_message="no job name")


def _job_exception(azure: Any, name: str, text: str) -> Exception:
    return azure.JobException(message=f"Exception : job {name}: {text}", target=azure.ErrorTarget.JOB,
                              no_personal_data_message="Exception raised on failed job.",
                              error_category=azure.ErrorCategory.USER_ERROR)
