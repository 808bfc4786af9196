"""`mltrain env list|show|save`: the curated catalog and your own environment presets (no torch)."""
from __future__ import annotations

import argparse
import difflib
import json
from pathlib import Path
from typing import List

import yaml

from mltrain.base.errors import MltrainError
from mltrain.config.paths import builtin_conf_dir, user_conf_dirs
from mltrain.environments import CURATED, from_config
from mltrain.environments.materialize import build_notes


def _preset(name: str) -> dict:
    """The `environment=<name>` preset as the config group holds it (user folders first)."""
    for base in user_conf_dirs() + [builtin_conf_dir()]:
        path = base / "environment" / f"{name}.yaml"
        if path.is_file():
            data = yaml.safe_load(path.read_text()) or {}
            data.pop("defaults", None)
            return data
    if name in CURATED:
        return {"name": name}
    close = difflib.get_close_matches(name, _names(), n=3, cutoff=0.5)
    raise MltrainError(f"no environment '{name}'" + (f"; closest: {', '.join(close)}" if close else "")
                       + " (see `mltrain env list`)")


def _names() -> List[str]:
    names = set(CURATED)
    for base in user_conf_dirs() + [builtin_conf_dir()]:
        names |= {p.stem for p in (base / "environment").glob("*.yaml")}
    return sorted(names, key=str.lower)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="mltrain env", description="Environments: curated and your own.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="every environment=<name> you can use")
    p = sub.add_parser("show", help="the full resolved spec")
    p.add_argument("name")
    p = sub.add_parser("save", help="write the spec to a directory (azureml_environment.json, conda_dependencies.yml)")
    p.add_argument("name")
    p.add_argument("directory")
    p.add_argument("--overwrite", action="store_true", help="replace a spec already saved there (Azure: overwrite=True)")
    args = parser.parse_args(argv)
    if args.cmd == "list":
        for name in _names():
            print(f"{name}{'   (curated)' if name in CURATED else ''}")
        return 0
    spec = from_config(_preset(args.name))
    if args.cmd == "show":
        print(json.dumps(spec.to_json(), indent=2, sort_keys=True))
        print(f"cache key: {spec.cache_key()}")
        source = (CURATED.get(spec.name) or {}).get("source")
        if source:
            print(f"from: {source}")
        for note in build_notes(spec):
            print(note)
        return 0
    folder = spec.save(Path(args.directory), overwrite=args.overwrite)
    print(f"saved {spec.name} to {folder}")
    return 0
