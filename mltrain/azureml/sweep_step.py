"""A pipeline's `type: sweep` step, run by the two engines mltrain has: the pipeline engine runs the
step as one run, like any step, and that run's program (mltrain.command.sweep_step_program) runs a sweep job of
its own in its process, the step's inputs filled in. When the sweep has ended, its best trial's outputs become
the step's outputs (copied as hard links where the file system allows, so nothing is duplicated on disk) and the
best trial's run id is recorded in the step's run directory (`sweep_step.json`) and its log, so downstream steps
read the best trial's files, as in Azure ML.

Planning (`step_values`) happens when the pipeline file is read; `hand_on` ends the step's program. A v1
HyperDriveStep runs the same program with its HyperDriveConfig's sweep request instead of a sweep job
(azureml.pipeline.steps.hyperdrive_step), and its outputs may be one file: the trials' metrics, or
the best trial's model file.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from mltrain.azureml import command_job, sweep_job
from mltrain.azureml.references import asset_name, config_dirs
from mltrain.azureml.yaml_lines import JobFile
from mltrain.jobspec.status import COMPLETED, FAILED

#: What the step records of its sweep in its run directory.
RECORD = "sweep_step.json"
#: Fields of the sweep step the generated sweep job keeps as written (inputs, outputs and trial are rewritten).
KEPT = ("search_space", "sampling_algorithm", "objective", "early_termination", "limits", "compute",
        "experiment_name")


def parse(jf: JobFile, where: tuple, body: Dict[str, Any], ctx: command_job.Context,
          default_compute: Optional[str]) -> sweep_job.SweepJob:
    """The sweep step checked as Azure checks a sweep job (its trial a command component)."""
    data = {k: v for k, v in body.items() if k != "type"}
    if data.get("compute") is None and default_compute is not None:
        data["compute"] = default_compute
    return sweep_job.parse(jf, where, data, ctx)


def step_values(jf: JobFile, where: tuple, body: Dict[str, Any], sweep: sweep_job.SweepJob,
                request_overrides: Sequence[str], default_compute: Optional[str]) -> Dict[str, Any]:
    """The config values of the step's run: its command runs this module with the sweep job (the
    trial's inputs bound to the step's, filled in when the step starts) in the command line."""
    trial = sweep.trial
    spec: Dict[str, Any] = {k: body[k] for k in KEPT if body.get(k) is not None}
    if spec.get("compute") is None and default_compute is not None:
        spec["compute"] = default_compute
    spec["type"] = "sweep"
    raw_trial = body["trial"]
    if isinstance(raw_trial, str):  # a component file (made absolute), or a registered one by name
        spec["trial"] = raw_trial if asset_name(raw_trial) else str((Path(jf.folder) / raw_trial).resolve())
    else:
        spec["trial"] = dict(raw_trial)
        if spec["trial"].get("code") is not None:
            spec["trial"]["code"] = trial.code
    inputs: Dict[str, Any] = {}
    args: List[str] = []
    given = body.get("inputs") or {}
    for inp in trial.inputs.values():
        if inp.name not in given:
            continue  # the component's default
        if inp.binding is not None or inp.is_data:
            inputs[inp.name] = {"type": inp.type if inp.type != "binding" else "uri_folder"}
            path = f"${{inputs.{inp.name}}}" if inp.binding is not None else inp.path
            args.append(f'--input "{inp.name}={path}"')
        else:
            inputs[inp.name] = inp.value
    spec["inputs"] = inputs
    outputs = [o.name for o in trial.outputs.values() if o.path is None]
    spec["outputs"] = {name: {"type": trial.outputs[name].type} for name in outputs}
    args += [f'--output "{name}=${{outputs.{name}}}"' for name in outputs]
    args += [f'--place "{name}={trial.outputs[name].type}={trial.outputs[name].link}"' for name in outputs
             if trial.outputs[name].link is not None]
    # the sweep's trials find the same `.mltrain` mappings as the pipeline (compute, datastores)
    home = _config_home(jf)
    # the user's overrides reach the trials (compute=slurm, run.root=...), the pipeline's own settings do not
    passed = [o for o in request_overrides if not o.lstrip("+~").startswith(("pipeline.", "pipeline="))]
    payload = {"job": spec, "cwd": home, "overrides": passed}
    encoded = base64.b64encode(json.dumps(payload).encode()).decode()  # no `$`, quote or space: safe anywhere
    command = f'exec "$MLTRAIN_PYTHON" -m mltrain.command.sweep_step_program {encoded} {" ".join(args)}'.rstrip()
    # The step's snapshot is the trial's code, so editing the trial's script reruns the step (reuse key).
    return {"job": {"source_directory": trial.code or "empty_code", "command": command},
            "distribution": {"node_count": 1, "process_count_per_node": 1}}


def _config_home(jf: JobFile) -> str:
    dirs = config_dirs(jf)
    cwd = Path.cwd()
    if not dirs or (cwd / ".mltrain").resolve() in dirs:
        return str(cwd)
    return str(dirs[0].parent)


# ------------------------------------------- what the step's program (mltrain.command.sweep_step_program) uses


def pair(item: str) -> Tuple[str, str]:
    """argparse's type of --input, --output and --place: a refused one is argparse's own one line and exit 2."""
    import argparse  # startup

    name, sep, path = item.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"{item!r} is not NAME=PATH")
    return name, path


def _link_tree(source: Path, target: Path) -> None:
    """`source`'s files at `target`: hard links where the file system allows, else copies."""
    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    if source.is_dir():
        shutil.copytree(source, target, copy_function=link, dirs_exist_ok=True)
    elif source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        link(str(source), str(target))


def _place(output: Path, kind: str, path: Path) -> None:
    """The best trial's output at the pipeline output's own `path`: a uri_file is that file (the single
    file the trial wrote in its output, linked or copied over whatever was there); a folder path links
    to the step's output folder (unless a real folder is already there), as a command step's does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "uri_file":
        files = [output] if output.is_file() else sorted(p for p in output.rglob("*") if p.is_file())
        if len(files) != 1:
            print(f"sweep step: {path} not written: the best trial's output {output.name} holds {len(files)} files, "
                  "not one", file=sys.stderr)
            return
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.unlink(missing_ok=True)
        _link_tree(files[0], tmp)
        os.replace(tmp, path)
    elif path.is_symlink() or not path.exists():
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(output)
        os.replace(tmp, path)


def earlier_sweep(sweep_dir: Path, runs_root: Path) -> Optional[str]:
    """The status of the sweep an earlier attempt of this step left in `sweep_dir`, or None."""
    from mltrain.sweeps import results  # heavy

    if not (sweep_dir / results.SWEEP_FILE).is_file():
        return None
    try:
        return str(results.load(str(sweep_dir), runs_root).status)
    except Exception:  # unreadable: the sweep starts again
        return None


def _trial_metrics(doc: Any) -> Dict[str, Any]:
    """Every trial's metrics by run id, as HyperDriveStep's metrics output holds them."""
    from mltrain.runs.metrics import read_metrics, summarize  # heavy

    return {m.run_id: summarize(read_metrics(Path(m.run_dir) / "metrics.jsonl"), None)
            for m in doc.members if m.run_id and m.run_dir}


def _as_file(target: Path, text: str) -> None:
    """`target` as one file (the pipeline engine made it an empty folder, as every output starts)."""
    if target.is_dir() and not any(target.iterdir()):
        target.rmdir()
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


def _best_file(best_dir: Path, model_file: Optional[str], target: Path) -> bool:
    """The best trial's `model_file` (a path in its run folder) at `target`: a file as that file, a folder
    as its files."""
    source = best_dir / (model_file or "outputs")
    if not source.exists():
        return False
    if source.is_file() and target.is_dir() and not any(target.iterdir()):
        target.rmdir()
    _link_tree(source, target)
    return True


def hand_on(sweep_dir: Path, run_dir: Path, code: int, payload: Dict[str, Any], outputs: Dict[str, str],
            places: Dict[str, str]) -> int:
    """Once the step's sweep has ended (`code`: how its run went, 0 when it ran to its end): its best trial's
    outputs become the step's, and `sweep_step.json` says which trial. Returns the step program's exit code."""
    from mltrain.sweeps import results  # heavy

    try:
        doc = results.load(str(sweep_dir), run_dir.parent)
    except Exception as exc:  # no sweep record: the sweep did not start
        print(f"sweep step: the sweep left no record ({exc})", file=sys.stderr)
        return code or 1
    if code != 0 and doc.status not in (COMPLETED, FAILED):  # stopped or refused: not a result to hand on
        print(f"sweep step: the sweep is {doc.status} (exit {code})", file=sys.stderr)
        return code
    best = next((m for m in doc.members if m.run_id == doc.best_run_id), None)
    if best is None or best.run_dir is None:
        print(f"sweep step: no trial logged {doc.primary_metric}; the step has no best trial", file=sys.stderr)
        return code or 1
    kinds = payload.get("outputs") or {}
    for name, target in outputs.items():
        kind = kinds.get(name) or {"kind": "folder"}
        if kind["kind"] == "metrics":
            _as_file(Path(target), json.dumps(_trial_metrics(doc), indent=2) + "\n")
        elif kind["kind"] == "model":
            if not _best_file(Path(best.run_dir), kind.get("model_file"), Path(target)):
                print(f"sweep step: the best trial {best.run_id} wrote no {kind.get('model_file')} (the model "
                      f"file its TrainingOutput names)", file=sys.stderr)
                return 1
        else:
            _link_tree(Path(best.run_dir) / "outputs" / name, Path(target))
    for name, place in places.items():
        kind, _, path = place.partition("=")
        _place(Path(outputs[name]), kind, Path(path))
    record = {"best_run_id": best.run_id, "best_run_dir": best.run_dir, "best_value": doc.best_value,
              "best_params": doc.best_params, "primary_metric": doc.primary_metric, "goal": doc.goal,
              "sweep_dir": str(sweep_dir), "sweep_status": doc.status, "names": payload.get("names") or {}}
    (run_dir / RECORD).write_text(json.dumps(record, indent=2) + "\n")
    print(f"sweep step: best trial {best.run_id} ({doc.primary_metric} {doc.best_value}); its outputs are "
          f"this step's: {', '.join(outputs) or 'none'}", flush=True)
    return 0
