"""`mltrain runs list|show|logs|resume`: run records; never imports torch."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import List

from mltrain.configpath import mltrain_home
from mltrain.records import find_run, iter_runs


def _root(args) -> Path:
    return Path(args.root).expanduser() if args.root else mltrain_home() / "runs"


def _list(args) -> int:
    runs = sorted(iter_runs(_root(args)), key=lambda r: r.data["phases"].get("Queued", 0), reverse=True)
    if not runs:
        print(f"no runs under {_root(args)}")
        return 0
    print(f"{'RUN':<48} {'STATUS':<10} {'RANKS':>5}  {'STARTED':<19}  DURATION")
    for r in runs[: args.limit]:
        start = r.data["phases"].get("Queued", 0)
        end = max(r.data["phases"].values())
        print(f"{r.id:<48} {r.status:<10} {r.data['world']['world_size']:>5}  "
              f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(start))}  {end - start:7.1f}s")
    return 0


def _show(args) -> int:
    record = find_run(_root(args), args.run)
    if args.json:
        print(json.dumps(record.data, indent=2, sort_keys=True))
        return 0
    d = record.data
    print(f"run:      {d['id']}\nstatus:   {d['status']}\ndir:      {record.dir}")
    print(f"world:    {d['world']['world_size']} rank(s) ({d['distribution']}, backend {d.get('backend') or '-'})")
    print(f"command:  {' '.join(d['command'])}")
    print("phases:   " + "  ".join(f"{k} {v:.2f}s" for k, v in record.durations().items()))
    for rank, info in sorted(d["ranks"].items(), key=lambda kv: int(kv[0])):
        print(f"rank {rank}:   exit code {info.get('exit_code')}")
    if d.get("error"):
        print(f"error:    {d['error']}")
    return 0


def _logs(args) -> int:
    record = find_run(_root(args), args.run)
    if record.data.get("compute") == "slurm":
        from mltrain import slurm

        slurm.refresh(record)
    path = record.log_path(None if args.rank is None and args.launcher else (args.rank or 0))
    if not path.is_file():
        print(f"no log at {path}", file=sys.stderr)
        return 1
    sys.stdout.write(path.read_text(encoding="utf-8", errors="replace"))
    return 0


def _status(args) -> int:
    record = find_run(_root(args), args.run)
    if record.data.get("compute") == "slurm":
        from mltrain import slurm

        slurm.refresh(record)
    job = record.data.get("slurm", {}).get("job_id")
    print(f"{record.id} {record.status}" + (f" (Slurm job {job})" if job else ""))
    if record.data.get("error") and record.status == "Failed":
        print(record.data["error"])
    return 0


def _cancel(args) -> int:
    import os
    import signal

    from mltrain.records import TERMINAL

    record = find_run(_root(args), args.run)
    if record.data.get("compute") == "slurm":
        from mltrain import slurm

        if slurm.refresh(record) not in TERMINAL:
            slurm.cancel_run(record)
    elif record.status not in TERMINAL:
        try:  # the local driver stops every rank and records Canceled
            os.kill(int(record.data["driver_pid"]), signal.SIGTERM)
        except ProcessLookupError:
            pass
        for _ in range(100):
            if find_run(_root(args), args.run).status in TERMINAL:
                break
            time.sleep(0.1)
    record = find_run(_root(args), args.run)
    print(f"{record.id} {record.status}")
    return 0


def _resume(args) -> int:
    from mltrain.launching import resume
    from mltrain.records import COMPLETED, QUEUED

    result = resume(find_run(_root(args), args.run), detach=args.detach)
    if args.detach and result.status == QUEUED:
        return 0
    return 0 if result.status == COMPLETED else (130 if result.status == "Canceled" else 1)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="mltrain runs", description="Inspect mltrain runs.")
    parser.add_argument("--root", help="runs directory (default: $MLTRAIN_HOME/runs)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("list", help="most recent runs first")
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(func=_list)
    p = sub.add_parser("show", help="status, phases, ranks and error of one run")
    p.add_argument("run", help="run id, unique id prefix, or run directory")
    p.add_argument("--json", action="store_true", help="print run.json")
    p.set_defaults(func=_show)
    p = sub.add_parser("logs", help="a rank's log (rank 0 by default) or the launcher's")
    p.add_argument("run")
    p.add_argument("--rank", type=int)
    p.add_argument("--launcher", action="store_true", help="the launcher's own log")
    p.set_defaults(func=_logs)
    p = sub.add_parser("status", help="the run's status (asks Slurm for a detached cluster run)")
    p.add_argument("run")
    p.set_defaults(func=_status)
    p = sub.add_parser("cancel", help="stop every rank of a run (scancel on Slurm); the run ends Canceled")
    p.add_argument("run")
    p.set_defaults(func=_cancel)
    p = sub.add_parser("resume", help="run a Failed or Canceled run again in its directory, from its checkpoint")
    p.add_argument("run")
    p.add_argument("--detach", action="store_true", help="return once a Slurm run is queued again")
    p.set_defaults(func=_resume)
    args = parser.parse_args(argv)
    return args.func(args)
