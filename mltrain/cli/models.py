"""`mltrain models register|list|show|download`: the model registry (mltrain.models.registry).
MLflow is imported only when one of these runs."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from mltrain.base.errors import MltrainError
from mltrain.base.home import mltrain_home
from mltrain.models.registry import Model
from mltrain.runs import mlflow_run
from mltrain.runs.record import find_run


def _pairs(values: Optional[List[str]], what: str) -> Dict[str, str]:
    out = {}
    for item in values or []:
        if "=" not in item:
            raise MltrainError(f"--{what} '{item}': expected key=value")
        k, v = item.split("=", 1)
        out[k] = v
    return out


def _ref(text: str) -> Tuple[str, Optional[int]]:
    """NAME or NAME:VERSION."""
    name, _, version = text.partition(":")
    if version and not version.isdigit():
        raise MltrainError(f"'{text}': a version is a whole number (NAME:3)")
    return name, int(version) if version else None


def _register(args) -> int:
    try:
        if args.run is not None:
            _bring(args)
        model = Model.register(args.name, args.path, run=args.run, tags=_pairs(args.tag, "tag"),
                               properties=_pairs(args.property, "property"), description=args.description,
                               runs_root=args.root)
    except MltrainError as exc:
        if not args.json:
            raise
        # A program (the v1 stand-in's Run.register_model inside a job) reads the refusal as data.
        print(json.dumps({"error": str(exc)}))
        return 2
    if args.json:
        print(json.dumps(model.to_json(), indent=2))
        return 0
    print(f"registered {model.name}:{model.version} ({model.framework}) from "
          f"{'run ' + model.run_id + ' ' if model.run_id else ''}{args.path}")
    return 0


def _list(args) -> int:
    models = Model.list(args.name, tags=args.tag, latest=not args.all and not args.name)
    if args.json:
        print(json.dumps([m.to_json() for m in models], indent=2))
        return 0
    if not models:
        print("no models" + (f" named {args.name}" if args.name else "") + (" with those tags" if args.tag else ""))
        return 0
    print(f"{'NAME':<24} {'VERSION':>7}  {'FRAMEWORK':<9} {'REGISTERED':<19}  {'RUN':<40} TAGS")
    for m in models:
        tags = " ".join(f"{k}={v}" for k, v in sorted(m.tags.items()))
        print(f"{m.name:<24} {m.version:>7}  {m.framework:<9} "
              f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(m.created_time))}  {m.run_id or '-':<40} {tags}")
    return 0


def _show(args) -> int:
    m = Model(*_ref(args.model))
    if args.json:
        print(json.dumps(m.to_json(), indent=2))
        return 0
    print(f"model:       {m.name}:{m.version}\nframework:   {m.framework}\nrun:         {m.run_id or '-'}"
          f"\npath:        {m.model_path}\nfiles:       {m.source}\ndescription: {m.description or '-'}")
    print("tags:        " + (" ".join(f"{k}={v}" for k, v in sorted(m.tags.items())) or "-"))
    print("properties:  " + (" ".join(f"{k}={v}" for k, v in sorted(m.properties.items())) or "-"))
    return 0


def _bring(args) -> None:
    """A run of a remote cluster keeps its outputs there until asked: the path is brought here first."""
    from mltrain.python_api.handle import Run  # startup

    Run(find_run(Path(args.root).expanduser() if args.root else mltrain_home() / "runs", args.run).dir).bring(args.path)


def _download(args) -> int:
    m = Model(*_ref(args.model))
    print(m.download(args.dir, exist_ok=args.exist_ok))
    return 0


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="mltrain models", description="the model registry")
    parser.add_argument("--root", help="runs root (default $MLTRAIN_HOME/runs)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("register", help="register a run's output (or a local path) as the next version of NAME")
    p.add_argument("name")
    p.add_argument("--run", help="the run the files come from (id, prefix or directory)")
    p.add_argument("--path", required=True, help="inside the run (outputs/model), or a local path without --run")
    p.add_argument("--tag", action="append", metavar="K=V")
    p.add_argument("--property", action="append", metavar="K=V")
    p.add_argument("--description")
    p.add_argument("--json", action="store_true", help="the version made (or the refusal, as {\"error\": ...}) as JSON")
    p.set_defaults(func=_register)
    p = sub.add_parser("list", help="the latest version of every model, or every version of NAME")
    p.add_argument("name", nargs="?")
    p.add_argument("--tag", action="append", metavar="K[=V]", help="only versions with this tag (repeatable)")
    p.add_argument("--all", action="store_true", help="every version, not only the latest")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_list)
    p = sub.add_parser("show", help="one version (the latest unless NAME:VERSION)")
    p.add_argument("model", metavar="NAME[:VERSION]")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_show)
    p = sub.add_parser("download", help="copy a version's files into DIR")
    p.add_argument("model", metavar="NAME[:VERSION]")
    p.add_argument("dir")
    p.add_argument("--exist-ok", action="store_true", help="overwrite files already in DIR")
    p.set_defaults(func=_download)
    args = parser.parse_args(argv)
    mlflow_run.catch_up()  # a run whose command was killed while mirroring it: its MLflow run first
    return args.func(args)
