"""The program of a pipeline's sweep step (`python -m mltrain.command.sweep_step_program SPEC --input ...
--output ...`): it runs the step's sweep in its own process, through the same request and engine as
`mltrain job create` (a v2 sweep step: mltrain.command.job_file) or `mltrain -m` (a v1 HyperDriveStep's
HyperDriveConfig), then hands the best trial's outputs on as the step's (mltrain.azureml.sweep_step.hand_on).

The step's run is this process's only work, so its directory and environment become the sweep's: the folder the
pipeline ran from (the trials' relative paths and the repository's `.mltrain` are read there) and the step's
variables without its rank's (RANK, MASTER_PORT, the step's MLflow run), which the trials must not inherit. A
SIGTERM or Ctrl-C that cancels the step reaches the sweep's engine here, which cancels the trials and records
their end before this program exits.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from mltrain.azureml import sweep_step
from mltrain.azureml.job_create import JobCreate
from mltrain.base.errors import MltrainError, RunCanceled, RunFailed
from mltrain.command.app import run_app
from mltrain.jobspec.status import COMPLETED
from mltrain.launch import nesting
from mltrain.launch.request import Request, merge_values, quote

#: The rank variables the step's own program has that its sweep's trials must not inherit.
NOT_PASSED = ("MLTRAIN_", "MLFLOW_", "AZUREML_", "AZURE_ML_", "AML_PARAMETER_", "AZ_BATCH")
KEPT_VARIABLES = (nesting.DEPTH, nesting.FILES)
RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR",
                  "MASTER_PORT", "TF_CONFIG")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="mltrain.command.sweep_step_program")
    parser.add_argument("spec")
    parser.add_argument("--input", action="append", default=[], type=sweep_step.pair)
    parser.add_argument("--output", action="append", default=[], type=sweep_step.pair)
    parser.add_argument("--place", action="append", default=[], type=sweep_step.pair)
    args = parser.parse_args(argv)
    payload = json.loads(base64.b64decode(args.spec))
    inputs: Dict[str, str] = dict(args.input)
    run_dir = Path(os.environ["MLTRAIN_RUN_DIR"])
    run_id = os.environ["MLTRAIN_RUN_ID"]
    sweep_dir = run_dir / "sweep"
    earlier = sweep_step.earlier_sweep(sweep_dir, run_dir.parent)
    code = 0
    if earlier != COMPLETED:
        experiment = _experiment(run_dir)
        _become_the_sweeps_driver(payload["cwd"])
        code = _run(lambda: _sweep(payload, inputs, run_dir, run_id, sweep_dir, experiment, again=earlier is not None))
    return sweep_step.hand_on(sweep_dir, run_dir, code, payload, dict(args.output), dict(args.place))


def _become_the_sweeps_driver(cwd: str) -> None:
    """This process's directory and environment as the sweep's (the nesting variables pass: the sweep is a job
    this step's code submits, mltrain.launch.nesting)."""
    kept = {k: v for k, v in os.environ.items()
            if not k.startswith(NOT_PASSED) or k in ("MLTRAIN_HOME", *KEPT_VARIABLES)}
    for name in RANK_VARIABLES:
        kept.pop(name, None)
    os.environ.clear()
    os.environ.update(kept)
    os.chdir(cwd)


def _sweep(payload: Dict[str, Any], inputs: Dict[str, str], run_dir: Path, run_id: str, sweep_dir: Path,
           experiment: Optional[str], again: bool) -> None:
    if again:  # the step runs again (`runs resume PIPELINE`, a requeued job): its sweep goes on
        from mltrain.sweeps import resume as sweep_resume  # startup

        print(f"sweep step: its sweep goes on, as `mltrain runs resume {sweep_dir}` runs it", flush=True)
        resumed = sweep_resume.prepare(sweep_dir, run_dir.parent, False)
        os.chdir(resumed.cwd)
        with resumed.context():
            run_app(Request(overrides=tuple(resumed.overrides)), isolate=False)
    elif "request" in payload:  # a v1 HyperDriveStep: the sweep Experiment.submit(hyperdrive_config) would start
        request = payload["request"]
        values = merge_values(request.get("values") or {}, {
            "inputs": dict(inputs), "experiment_name": experiment, "run": {"root": str(run_dir.parent)},
            "hydra": {"sweep": {"dir": str(sweep_dir)}}})
        print(f"sweep step: a HyperDriveConfig's sweep in {sweep_dir}", flush=True)
        run_app(Request(overrides=tuple(request["overrides"]), config_dirs=tuple(request.get("config_dirs") or ()),
                        values=values), isolate=False)
    else:
        from mltrain.command.job_file import run_job_file  # startup

        job = payload["job"]
        for name, path in inputs.items():
            job["inputs"][name] = {**job["inputs"][name], "path": path}
        # kept for the user to read (JSON is YAML); the sweep is planned from the values in memory
        file = run_dir / "sweep_job.yml"
        file.write_text(json.dumps(job, indent=2) + "\n")
        print(f"sweep step: the sweep job {file} in {sweep_dir}", flush=True)
        run_job_file(JobCreate(file=str(file), data=job, name=f"{run_id}-sweep",
                               overrides=(*payload["overrides"], f"hydra.sweep.dir={quote(str(sweep_dir))}")))


def _run(sweep: Any) -> int:
    """The sweep's end as an exit code, as `mltrain job create` would exit: 0 when it ran to its end, its runs'
    status's code when they failed or were canceled, 1 with its one line for a refusal."""
    try:
        sweep()
    except (RunFailed, RunCanceled) as exc:
        return exc.exit_code
    except MltrainError as exc:
        print(f"sweep step: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code or 1
    return 0


def _experiment(run_dir: Path) -> Optional[str]:
    from mltrain.runs.record import RunRecord  # startup

    return RunRecord.load(run_dir).doc.experiment


if __name__ == "__main__":
    sys.exit(main())
