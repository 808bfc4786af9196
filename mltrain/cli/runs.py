"""`mltrain runs list|show|logs|status|wait|cancel|resume|best|plot|compare|rerun|sync`: every look goes through the run handle
(mltrain.python_api.handle), so what is shown is what the run's backend knows now; `runs list` takes the runs that
have ended from the runs index (mltrain.runs.index) and asks the backends only about the others. Never
imports torch."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, List

from mltrain.base.errors import MltrainError, first_line
from mltrain.base.home import mltrain_home
from mltrain.jobspec.status import QUEUED, TERMINAL, exit_code
from mltrain.runs import index, mlflow_run
from mltrain.runs.metrics import last_and_best, last_text, read_metrics
from mltrain.runs.record import find_run

if TYPE_CHECKING:
    from mltrain.python_api.handle import Run


def _root(args) -> Path:
    return Path(args.root).expanduser() if args.root else mltrain_home() / "runs"


def _catch_up(root: Path) -> None:
    """Sweeps and pipelines whose drivers run on a remote cluster: their runs made since the last look mirrored here
    first (mltrain.backends.remote.multirun)."""
    if any(_going(path) for path in (root / "_sweeps").glob("*/remote.json")):
        # only where a sweep sent to a cluster has not been seen ending: the ended ones cost no import
        from mltrain.backends.remote.multirun import catch_up  # startup

        catch_up(root)


def _going(mirror: Path) -> bool:
    try:
        return not json.loads(mirror.read_text(encoding="utf-8")).get("ended")
    except (OSError, ValueError):
        return False


def _handle(args) -> Run:
    from mltrain.python_api.handle import Run  # startup

    _catch_up(_root(args))
    if args.run is None:  # show, logs, status: the newest run, as `runs best` takes the newest sweep
        newest = max(index.newest(_root(args), 1), key=lambda r: r.created, default=None)
        if newest is None:
            raise MltrainError(f"no runs under {_root(args)}")
        return Run(_root(args) / newest.folder)
    return Run(find_run(_root(args), args.run).dir)


def _list(args) -> int:
    _catch_up(_root(args))
    unreadable: List[Path] = []
    runs = index.newest(_root(args), args.limit, unreadable)
    if any(r.status not in TERMINAL for r in runs):  # only these are asked of their backend
        from mltrain.python_api.handle import refresh_rows  # startup

        runs = refresh_rows(_root(args), runs, unreadable)
    runs.sort(key=lambda r: r.created, reverse=True)
    if not runs and not unreadable:
        print(f"no runs under {_root(args)}")
        return 0
    print(f"{'RUN':<48} {'STATUS':<10} {'RANKS':>5}  {'STARTED':<19}  DURATION")
    for r in runs[: args.limit]:
        start = r.created
        end = r.ended_at
        print(f"{r.id:<48} {r.status:<10} {r.world_size:>5}  "
              f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(start))}  {end - start:7.1f}s")
    for path in sorted(unreadable):
        print(f"{path.name:<48} {'unreadable':<10}  ({path / 'run.json'} cannot be read; the rest of the run folder is untouched)")
    return 0


def _show_parallel(folder: Path) -> None:
    """A parallel job's verdict and each mini-batch it gave up on, with its attempts' errors (logs/user/, as Azure
    lays them out)."""
    result, errors = folder / "logs" / "user" / "job_result.txt", folder / "logs" / "user" / "error.txt"
    if not result.is_file():
        return
    print(f"parallel:  {result.read_text().strip()}")
    failed = errors.read_text().splitlines() if errors.is_file() else []
    for line in failed[:20]:
        print(f"  {line}")
    if len(failed) > 20:
        print(f"  ... {len(failed) - 20} more in {errors}")


def _show(args) -> int:
    from mltrain.python_api.handle import backend_of  # startup

    run = _handle(args)
    record = run.load()
    d = record.doc
    if args.json:
        print(json.dumps(record.to_json(), indent=2, sort_keys=True))
        return 0
    if d.pipeline is not None:
        _show_pipeline(record)
        return 0
    where = backend_of(record).locate(record)
    print(f"run:       {d.id}\nstatus:    {d.status}{f'  ({where})' if where else ''}\ndir:       {record.dir}")
    print(f"world:     {d.world.world_size} rank(s) on {d.backend or d.compute} "
          f"({d.distribution}, process group {d.process_group or '-'})")
    print(f"overrides: {' '.join(d.overrides) or '(none)'}")
    print(f"command:   {' '.join(d.command)}")
    print("phases:    " + "  ".join(f"{k} {v:.2f}s" for k, v in record.durations().items()))
    for rank, info in sorted(d.ranks.items(), key=lambda kv: int(kv[0])):
        devices = "" if info.devices is None else f", GPUs {info.devices or 'none'}"
        print(f"rank {rank}:    exit code {info.exit_code}" + (f" on {info.host}" if info.host else "") + devices)
    for failure in d.node_failures:
        lost = ", ".join(failure.get("lost") or []) or failure.get("nodes") or "?"
        print(f"node lost:  attempt {failure.get('attempt')} on {lost} (Slurm job {failure.get('job_id')}): "
              f"{failure.get('then')}")
    _show_parallel(record.dir)
    records = read_metrics(record.dir / "metrics.jsonl")
    metrics, texts = last_and_best(records), last_text(records)
    if metrics or texts:
        print("metrics:   (name: last, min, max over n values)")
        for name, m in sorted(metrics.items()):
            print(f"  {name}: {m['last']:.6g}, {m['min']:.6g}, {m['max']:.6g} over {m['count']}")
        for name, text in sorted(texts.items()):  # what ran, e.g. the trainer's input_pipeline
            print(f"  {name}: {text}")
    outputs = d.outputs or []
    if outputs:
        print(f"outputs:   {len(outputs)} file(s) in {record.dir / 'outputs'}")
        for f in outputs[:20]:
            print(f"  {f['path']} ({f['bytes']} bytes)")
    if d.error:
        print(f"error:     {d.error}")
    return 0


def _logs(args) -> int:
    run = _handle(args)
    record = run.load()  # a detached cluster run's record is brought up to date first (a remote one's logs too)
    rank = None if args.rank is None and args.launcher else (args.rank or 0)
    path = run.log_path(rank)
    if not args.follow:
        if not path.is_file():
            print(f"no log at {path}", file=sys.stderr)
            return 1
        sys.stdout.write(path.read_text(encoding="utf-8", errors="replace"))
        return 0
    # -f: what the log gains, until the run ends; each look brings the record (and a remote run's logs) up to date
    offset, poll = 0, 0.5
    while True:
        if path.is_file():
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
            offset += len(chunk)
            sys.stdout.write(chunk.decode("utf-8", errors="replace"))
            sys.stdout.flush()
        if record.status in TERMINAL:
            return 0
        time.sleep(poll)
        record = run.load()


def _show_pipeline(record) -> int:
    d, pipe = record.doc, record.doc.pipeline
    print(f"pipeline:  {pipe.name} ({pipe.mode})\nrun:       {d.id}\nstatus:    {d.status}\n"
          f"dir:       {record.dir}")
    print(f"overrides: {' '.join(d.overrides) or '(none)'}")
    print(f"{'STEP':<16} {'STATUS':<10} {'AFTER':<20} {'SECONDS':>7}  RUN / WHY")
    for name in pipe.order:
        info = pipe.steps[name]
        phases = info.phases or {}
        took = max(phases.values()) - min(phases.values()) if phases else 0.0
        print(f"{name:<16} {info.status:<10} {','.join(info.parents) or '-':<20} {took:7.1f}  {info.run_id}")
        why = info.error if info.status in ("Failed", "Canceled") else info.reason
        if why:
            print(f"{'':<57}{first_line(why)}")
    if d.error:
        print(f"error:     {d.error}")
    return 0


def _status(args) -> int:
    from mltrain.python_api.handle import backend_of  # startup

    record = _handle(args).load()
    where = backend_of(record).locate(record)
    print(f"{record.id} {record.status}" + (f" ({where})" if where else ""))
    if record.doc.error and record.status == "Failed":
        print(record.doc.error)
    return 0


def _wait(args) -> int:
    """Block until the run ends; the exit status is the run's (0 Completed), 124 on --timeout like `timeout`."""
    run = _handle(args)
    try:
        status = run.wait(show_output=args.follow, raise_on_error=False, timeout=args.timeout)
    except TimeoutError as exc:
        print(f"mltrain: {exc}", file=sys.stderr)
        return 124
    print(f"{run.id} {status}")
    return exit_code(status)


def _cancel(args) -> int:
    from mltrain.sweeps import cancel as sweep_cancel  # startup

    remote = _root(args) / "_sweeps" / args.run / "remote.json" if args.run else None
    if remote is not None and remote.is_file():  # its driver runs on a cluster: it cancels its members there
        from mltrain.backends.remote import multirun  # startup

        print(f"sweep {args.run}: {multirun.cancel(remote.parent)}")
        return 0
    sweep = sweep_cancel.locate(args.run, _root(args))
    if sweep is not None:
        done = sweep_cancel.cancel(sweep)
        print(f"sweep {sweep.name}: {done.canceled} member(s) Canceled ({done.never_made} of them never made), "
              f"{done.had_ended} had ended")
        return 0
    run = _handle(args)
    print(f"{run.id} {run.cancel()}")
    return 0


def _download(args) -> int:
    run = _handle(args)
    brought = run.download(args.path)
    target = run.run_dir / args.path
    if not target.exists():
        print(f"run {run.id} has no {args.path}", file=sys.stderr)
        return 1
    print(f"{target}" + (f" ({len(brought)} file(s) brought from its cluster)" if brought else ""))
    return 0


def _resume(args) -> int:
    from mltrain.launch.orchestrate import resume  # startup
    from mltrain.sweeps import resume as sweep_resume  # startup

    remote = _root(args) / "_sweeps" / args.run / "remote.json"
    if remote.is_file():  # its driver ran on a cluster: resumed there
        from mltrain.backends.remote import multirun  # startup

        multirun.resume(remote.parent, args.detach)
        return 0
    sweep = sweep_resume.locate(args.run, _root(args))
    if sweep is not None:  # a HyperDrive sweep goes on as `mltrain -m` with its own overrides
        from mltrain.command.app import run_app  # startup
        from mltrain.launch.request import Request  # startup

        again = sweep_resume.prepare(sweep, _root(args), args.detach)
        if os.path.realpath(os.getcwd()) != os.path.realpath(again.cwd):
            return _resume_from(again.cwd, sweep, _root(args))
        # This command becomes the sweep's driver again (it runs in the folder the sweep ran from).
        with again.context():
            run_app(Request(overrides=tuple(again.overrides)), isolate=False)  # this process runs nothing else
        return 0
    record = find_run(_root(args), args.run)
    if record.doc.pipeline and any((_root(args) / "_sweeps").glob("*/remote.json")):
        from mltrain.backends.remote import multirun  # startup

        there = multirun.mirror_holding(_root(args), record.dir)
        if there is not None:  # a pipeline whose driver ran on a cluster: resumed there
            multirun.resume(there, args.detach)
            return 0
    if record.doc.pipeline:
        from mltrain.pipelines.resume_steps import resume as resume_pipeline  # startup

        if args.detach:
            raise MltrainError("runs resume --detach: a pipeline's steps are resumed by this command, one after "
                               "another; keep it running (e.g. under nohup)")
        return exit_code(resume_pipeline(record))
    result = resume(record, detach=args.detach)
    if args.detach and result.status == QUEUED:
        return 0
    return exit_code(result.status)


def _resume_from(cwd: str, sweep: Path, root: Path) -> int:
    """`runs resume SWEEP` again, in a process started in the folder the sweep ran from: its overrides'
    relative paths and its `.mltrain/` are read from there, as its first driver read them, and this
    process's own directory never changes. That process is the sweep's driver; this one waits for it,
    leaves Ctrl-C to it (the terminal sends it to both) and passes it a SIGTERM, and exits as it does."""
    import signal  # startup

    from mltrain.base.processes import run_in_foreground  # startup

    return run_in_foreground([sys.executable, "-m", "mltrain", "runs", "--root", str(root), "resume", str(sweep)],
                             cwd, forward=[signal.SIGTERM], ignore=[signal.SIGINT])


def _records(args) -> list:
    from mltrain.python_api.handle import Run  # startup

    return [Run(find_run(_root(args), ref).dir).load() for ref in args.runs]


def _plot(args) -> int:
    from mltrain.python_api import history  # startup

    names = history.plot(_records(args), Path(args.output), args.metric)
    print(f"{args.output}: {', '.join(names)} of {len(args.runs)} run(s)")
    return 0


def _compare(args) -> int:
    from mltrain.python_api import history  # startup

    table = history.compare(_records(args))
    if args.json:
        print(json.dumps(table, indent=2, default=str))
        return 0

    col = max([24] + [len(r) for r in table["runs"]])

    def cell(value) -> str:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        return text if len(text) <= col else text[: col - 3] + "..."

    def row(label: str, cells) -> None:
        print(f"{label:<{width}}  " + "  ".join(f"{c:<{col}}" for c in cells).rstrip())

    width = max([len(k) for k in table["params"]] + [len(k) + 5 for k in table["metrics"]] + [6])
    row("", table["runs"])
    row("status", table["status"])
    for key, values in table["params"].items():
        row(key, [cell(v) for v in values])
    if not table["params"]:
        print("(the runs' configs do not differ)")
    for name, values in table["metrics"].items():
        for what in ("last", "min", "max"):
            row(f"{name} {what}", [f"{v[what]:.6g}" if v else "-" for v in values])
    return 0


def _sync(args) -> int:
    from mltrain.python_api.handle import Run, list_runs  # startup
    from mltrain.tracking import mirroring as tracking  # startup
    from mltrain.tracking import mlflow_store as store  # startup

    store.require_mlflow()
    if args.runs:
        records = [Run(find_run(_root(args), ref).dir).load() for ref in args.runs]
    else:  # what the mirror has not seen end: new runs, and runs that were still going when it looked
        every = list_runs(_root(args))
        records = [r for r in every if (r.doc.mlflow.status if r.doc.mlflow else None) != r.status]
    ids = tracking.mirror(str(r.dir) for r in records)
    closed = tracking.close_sweeps(records if args.runs else every)  # sweeps over whose parent still runs
    print(f"mirrored {len(ids)} run(s) into {store.uri()}" + (f"; ended {closed} sweep(s)" if closed else ""))
    return 0


def _rerun(args) -> int:
    from mltrain.python_api import history  # startup

    result = history.rerun(find_run(_root(args), args.run), detach=args.detach)
    if args.detach and result.status == QUEUED:
        return 0
    return exit_code(result.status)


def _best(args) -> int:
    from mltrain.sweeps import results  # startup

    _catch_up(_root(args))
    doc = results.load(args.sweep, _root(args))
    if args.json:
        keys = ("sweep_dir", "status", "primary_metric", "goal", "best_run_id", "best_value", "best_params")
        print(json.dumps({k: getattr(doc, k) for k in keys}, indent=2))
        return 0
    if not doc.best_run_id:
        print(f"no member of {doc.sweep_dir} has logged {doc.primary_metric or 'a primary metric'} yet",
              file=sys.stderr)
        return 1
    if args.id:
        print(doc.best_run_id)
        return 0
    for line in results.summary_lines(doc):
        print(line)
    return 0


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="mltrain runs", description="Inspect mltrain runs.")
    parser.add_argument("--root", help="runs directory (default: $MLTRAIN_HOME/runs)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("list", help="most recent runs first")
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(func=_list)
    p = sub.add_parser("show", help="status, phases, ranks, metrics, outputs and error of one run")
    p.add_argument("run", nargs="?", help="run id, unique id prefix, or run directory (default: the newest run)")
    p.add_argument("--json", action="store_true", help="print run.json")
    p.set_defaults(func=_show)
    p = sub.add_parser("logs", help="a rank's log (rank 0 by default) or the launcher's")
    p.add_argument("run", nargs="?", help="default: the newest run")
    p.add_argument("--rank", type=int)
    p.add_argument("--launcher", action="store_true", help="the launcher's own log")
    p.add_argument("-f", "--follow", action="store_true", help="go on printing what the log gains until the run ends")
    p.set_defaults(func=_logs)
    p = sub.add_parser("status", help="the run's status (asks Slurm for a detached cluster run)")
    p.add_argument("run", nargs="?", help="default: the newest run")
    p.set_defaults(func=_status)
    p = sub.add_parser("wait", help="block until the run ends; exits 0 when it Completed (for scripts and CI)")
    p.add_argument("run", nargs="?", help="default: the newest run")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="give up (exit 124) after this long")
    p.add_argument("--follow", action="store_true", help="stream rank 0's output and status changes meanwhile")
    p.set_defaults(func=_wait)
    p = sub.add_parser("cancel", help="stop every rank of a run (scancel on Slurm); the run ends Canceled. Of a "
                                      "sweep: every member that has not ended")
    p.add_argument("run", help="run id, unique id prefix or run directory; or a sweep directory or its name")
    p.set_defaults(func=_cancel)
    p = sub.add_parser("download", help="a run's outputs (or PATH of its folder) from the cluster it ran on, into "
                                        "its folder here (of a remote compute: they stay there until asked for)")
    p.add_argument("run", nargs="?", help="default: the newest run")
    p.add_argument("path", nargs="?", default="outputs", help="a file or folder of the run's folder (default: outputs)")
    p.set_defaults(func=_download)
    p = sub.add_parser("resume", help="run a Failed or Canceled run again in its directory, from its checkpoint "
                                      "(of a pipeline: the steps that did not complete); or go on with a HyperDrive "
                                      "sweep whose driver died or was canceled")
    p.add_argument("run", help="run id, unique id prefix or run directory; or a sweep directory or its name")
    p.add_argument("--detach", action="store_true", help="return once a Slurm run is queued again")
    p.set_defaults(func=_resume)
    p = sub.add_parser("best", help="a HyperDrive sweep's members by primary metric, best marked (newest sweep by default)")
    p.add_argument("sweep", nargs="?", help="sweep directory, or its name under <runs>/_sweeps")
    p.add_argument("--id", action="store_true", help="print only the best run's id (for scripts)")
    p.add_argument("--json", action="store_true", help="best_run_id, best_value and best_params as JSON")
    p.set_defaults(func=_best)
    p = sub.add_parser("plot", help="metric curves of one or several runs, into a PNG")
    p.add_argument("runs", nargs="+", metavar="RUN")
    p.add_argument("--metric", help="only this metric, or those under a prefix ending in / (system/: CPU, memory and "
                   "GPU use); default: every scalar metric the run's programs logged, one panel each")
    p.add_argument("-o", "--output", required=True, metavar="FILE.png")
    p.set_defaults(func=_plot)
    p = sub.add_parser("compare", help="the parameters that differ, and each run's final and best metrics")
    p.add_argument("runs", nargs="+", metavar="RUN")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_compare)
    p = sub.add_parser("rerun", help="a new run from a run's recorded config, snapshot and environment")
    p.add_argument("run")
    p.add_argument("--detach", action="store_true", help="return once a Slurm run is queued")
    p.set_defaults(func=_rerun)
    p = sub.add_parser("sync", help="mirror runs into the MLflow store now (default: every run not yet complete there)")
    p.add_argument("runs", nargs="*", metavar="RUN")
    p.set_defaults(func=_sync)
    args = parser.parse_args(argv)
    mlflow_run.catch_up()  # a run whose command was killed while mirroring it: its MLflow run first
    return args.func(args)
