"""Pipeline: a graph of v1 steps, compiled into an mltrain pipeline file and run by mltrain's engine
(`mltrain pipeline=NAME` is the same thing from the command line)."""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from azureml.core.run import Run
from azureml.exceptions import UserErrorException


class Pipeline:
    def __init__(self, workspace: Any, steps: Any, description: Optional[str] = None, default_datastore: Any = None,
                 default_source_directory: Optional[str] = None, resolve_closure: bool = True,
                 _workflow_provider: Any = None, _service_endpoint: Any = None, **kwargs: Any) -> None:
        from azureml.pipeline.core.graph import StepSequence

        self.workspace = workspace
        self.description = description
        self.default_source_directory = default_source_directory
        items = steps.steps if isinstance(steps, StepSequence) else list(steps if isinstance(steps, list) else [steps])
        self._steps = _closure(items) if resolve_closure else items
        if not self._steps:
            raise UserErrorException("Pipeline: steps must name at least one step")
        names = [s.name for s in self._steps]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise UserErrorException(f"Pipeline: step names must be unique; '{dupes[0]}' is used twice")

    def validate(self) -> List[str]:
        self._graph({})
        return []

    def _graph(self, parameters: Dict[str, Any]) -> Any:
        from azureml.pipeline.steps.base import compile_steps

        return compile_steps(self._steps, parameters, self.default_source_directory)

    def submit(self, experiment_name: str, pipeline_parameters: Optional[Dict[str, Any]] = None,
               continue_on_step_failure: bool = False, regenerate_outputs: bool = False, parent_run_id: Any = None,
               credential_passthrough: Any = None, **kwargs: Any) -> PipelineRun:
        from azureml.core._bridge import origin
        from azureml.core.experiment import Experiment

        return self._submit(Experiment(self.workspace, experiment_name), None, origin(),
                            pipeline_parameters=pipeline_parameters, regenerate_outputs=regenerate_outputs,
                            continue_on_step_failure=continue_on_step_failure)

    def _submit(self, experiment: Any, tags: Any, origin: Dict[str, Any], pipeline_parameters: Any = None,
                regenerate_outputs: bool = False, continue_on_step_failure: bool = False,
                **kwargs: Any) -> PipelineRun:
        import yaml  # submission

        from mltrain.base.errors import MltrainError  # submission
        from mltrain.base.home import mltrain_home
        from mltrain.config.memory_nodes import ConfigNode  # submission
        from mltrain.launch.request import Request  # submission
        from mltrain.python_api.api import submit_multirun  # submission

        steps, dirs = self._graph(dict(pipeline_parameters or {}))
        import re

        name = re.sub(r"[^\w-]", "_", experiment.name)  # the pipeline's runs are the experiment's
        run_id = f"{experiment.name}_{time.strftime('%Y%m%d_%H%M%S')}_{uuid.uuid4().hex[:6]}"
        conf = mltrain_home() / "v1_pipelines" / run_id
        conf.mkdir(parents=True)
        doc = {"steps": steps, "force_rerun": bool(regenerate_outputs),
               "continue_on_step_failure": bool(continue_on_step_failure)}
        # for the user, not read back: the compiled pipeline reaches its driver as an option of the `pipeline`
        # group held in memory (carried in the driver's request), as a v2 pipeline job's does
        text = ("# A v1 pipeline, compiled from " + f"{origin.get('file', '?')}:{origin.get('line', '?')}\n"
                + yaml.safe_dump(doc, sort_keys=False))
        (conf / COMPILED).write_text(text, encoding="utf-8")
        (conf / OUTPUTS).write_text(json.dumps(_pipeline_outputs(self._steps)), encoding="utf-8")
        run_dir = mltrain_home() / "runs" / run_id
        request = Request(overrides=(f"pipeline={name}",), nodes=(ConfigNode("pipeline", name, doc),),
                          values={"run": {"id": run_id}}, config_dirs=tuple(dirs))
        try:
            driver = submit_multirun(request, ready=str(run_dir / "run.json"), name=run_id)
        except MltrainError as exc:
            raise UserErrorException(str(exc)) from None
        _keep(self, conf)
        run = PipelineRun(experiment, run_id, _run_dir=str(run_dir), _driver=driver)
        run._pipeline = self
        return run

    def publish(self, name: Optional[str] = None, description: Optional[str] = None, version: Optional[str] = None,
                continue_on_step_failure: Optional[bool] = None) -> Any:
        """A PublishedPipeline: this pipeline kept under a name, its source folders snapshotted now
        (azureml.pipeline.core.published_pipeline says where and what)."""
        from azureml.pipeline.core.published_pipeline import publish

        return publish(self, name, description, version, continue_on_step_failure)


def _keep(pipeline: Pipeline, conf: Path) -> None:
    """Keep the submitted pipeline beside its compiled file, so that `PipelineRun.publish_pipeline` works
    on a run found again later by id. A pipeline that cannot be pickled only loses that."""
    from azureml.pipeline.core.published_pipeline import anchored, save_pipeline

    try:
        save_pipeline(anchored(pipeline), conf / "pipeline.pkl")
    except Exception:  # noqa: BLE001 (a record kept for later must never fail the submit that is running)
        pass


#: {pipeline_output_name: [step key, output name]} of a submitted pipeline, beside its compiled file.
OUTPUTS = "pipeline_outputs.json"
#: The pipeline as it was compiled and handed to its driver, kept for the user to read.
COMPILED = "compiled.yaml"


def _pipeline_outputs(steps: List[Any]) -> Dict[str, List[str]]:
    """The outputs a PipelineData names for the pipeline (`pipeline_output_name`), for get_pipeline_output."""
    from azureml.pipeline.steps.base import _written_by, step_key

    return {str(d.pipeline_output_name): [step_key(s.name), d.name] for s in steps for d in _written_by(s)
            if getattr(d, "pipeline_output_name", None)}


def _closure(steps: List[Any]) -> List[Any]:
    """The steps given and every step whose output they read (Azure's resolve_closure)."""
    from azureml.pipeline.steps.base import producers

    found: List[Any] = []
    todo = list(steps)
    while todo:
        step = todo.pop(0)
        if any(step is s for s in found):
            continue
        found.append(step)
        todo += producers(step)
    return found


class PipelineRun(Run):
    """The pipeline's own run; its steps are runs of their own (get_steps, find_step_run)."""

    def __init__(self, experiment: Any, run_id: str, _run_dir: Optional[str] = None, _driver: Any = None,
                 **kwargs: Any) -> None:
        # PipelineRun(experiment, run_id): Azure's way to find a run started elsewhere (a REST call's "Id")
        super().__init__(experiment, run_id=None if _run_dir else run_id, _run_dir=_run_dir)
        self._driver = _driver
        self._pipeline: Any = None  # the Pipeline submitted, when this process submitted it

    def publish_pipeline(self, name: str, description: Optional[str] = None, version: Optional[str] = None,
                         continue_on_step_failure: Optional[bool] = None, **kwargs: Any) -> Any:
        """Publish the pipeline this run ran (Azure's publish-from-a-run)."""
        from azureml.pipeline.core.published_pipeline import load_pipeline

        from mltrain.base.home import mltrain_home

        pipeline = self._pipeline
        if pipeline is None:
            kept = mltrain_home() / "v1_pipelines" / self.id / "pipeline.pkl"
            if not kept.is_file():
                raise UserErrorException(f"PipelineRun.publish_pipeline: run {self.id} kept no pipeline to publish "
                                         "(it was not submitted by a v1 Pipeline here): publish the Pipeline itself")
            pipeline = load_pipeline(kept)
        return pipeline.publish(name=name, description=description, version=version,
                                continue_on_step_failure=continue_on_step_failure)

    def _graph(self) -> Dict[str, Any]:
        data = json.loads((Path(str(self._dir)) / "run.json").read_text(encoding="utf-8"))
        return dict(data.get("pipeline") or {})

    def wait_for_completion(self, show_output: bool = True, timeout_seconds: int = 9223372036854775807,
                            raise_on_error: bool = True) -> Any:
        from azureml.exceptions import ActivityFailedException

        from mltrain.runs.waiting import wait_until  # submission

        if self._driver is not None:
            self._driver.wait(show_output, timeout=timeout_seconds)
        else:  # a pipeline run found again later: its record says when it ended
            wait_until(lambda: self.get_status() in ("Completed", "Failed", "Canceled"), timeout=timeout_seconds,
                       poll=0.2)
        status = self.get_status()
        if raise_on_error and status in ("Failed", "Canceled"):
            error = (self._driver.outcome() or {}).get("error") if self._driver is not None else None
            raise ActivityFailedException(f"pipeline run {self.id} {status}: {error or ''}".strip())
        return status

    def get_steps(self) -> Iterator[StepRun]:
        graph = self._graph()
        for name in reversed(graph.get("order") or []):  # Azure lists the last step first
            entry = graph["steps"][name]
            yield StepRun(self.experiment, name, entry)

    def find_step_run(self, name: str) -> List[StepRun]:
        from azureml.pipeline.steps.base import step_key

        return [s for s in self.get_steps() if s.name in (name, step_key(name))]

    def get_pipeline_output(self, pipeline_output_name: str) -> Any:
        """The PortDataReference of an output named with PipelineData(pipeline_output_name=...)."""
        from mltrain.base.home import mltrain_home

        try:
            named = json.loads((mltrain_home() / "v1_pipelines" / self.id / OUTPUTS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            named = {}
        if pipeline_output_name not in named:
            raise UserErrorException(f"pipeline run {self.id} has no pipeline output '{pipeline_output_name}' "
                                     f"(outputs: {', '.join(sorted(named)) or 'none'})")
        step, output = named[pipeline_output_name]
        entry = self._graph().get("steps", {}).get(step)
        if entry is None:
            raise UserErrorException(f"pipeline run {self.id}: step '{step}', which writes '{pipeline_output_name}', "
                                     "has not started")
        return StepRun(self.experiment, step, entry).get_output_data(output)

    def get_pipeline_runs(self) -> List[PipelineRun]:
        return [self]

    def cancel(self) -> None:
        self._h().cancel()


class StepRun(Run):
    """A step's run; `reused` and `reuse_reason` say whether it ran or took an earlier run's outputs."""

    def __init__(self, experiment: Any, name: str, entry: Dict[str, Any]) -> None:
        super().__init__(experiment, _run_dir=entry["run_dir"])
        self._step_name = name
        self.reused = bool(entry.get("reused_from"))
        self.reused_from = entry.get("reused_from")
        self.reuse_reason = entry.get("reason")
        self._entry = entry
        if self.reused_from and self._dir is not None:  # its files and outputs are the earlier run's, as in Azure
            self._dir = self._dir.parent / str(self.reused_from)

    @property
    def name(self) -> str:
        return self._step_name

    def get_status(self) -> str:
        return str(self._entry.get("status")) if self.reused else super().get_status()

    def get_output_data(self, name: str) -> Any:
        from azureml.core.datastore import DataReference, Datastore

        folder = Path(str(self._dir)) / "outputs" / name
        # Azure's PortDataReference: path_on_datastore is azureml/<step run id>/<output>, where download() puts it
        ref = DataReference(Datastore(None, "step_outputs"), name, f"azureml/{Path(str(self._dir)).name}/{name}")
        ref._mltrain_path = lambda: str(folder)  # type: ignore[method-assign]
        return ref
