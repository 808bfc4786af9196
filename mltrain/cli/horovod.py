"""`mltrain horovod build|check`: Horovod built against the torch mltrain's environment runs."""
from __future__ import annotations

import argparse
import json
import sys
from typing import List

from mltrain.environments import horovod


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="mltrain horovod", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("build", help=f"build Horovod {horovod.VERSION} for this torch (cached) and install it")
    p.add_argument("--python", default=sys.executable, help="the environment's interpreter (default: mltrain's)")
    p.add_argument("--force", action="store_true", help="rebuild even if a cached wheel fits")
    p.add_argument("--no-install", action="store_true", help="only build (or find) the wheel")
    p = sub.add_parser("check", help="what the installed Horovod was built with")
    p.add_argument("--python", default=sys.executable)
    args = parser.parse_args(argv)
    if args.cmd == "build":
        wheel = horovod.build(args.python, force=args.force)
        if not args.no_install:
            horovod.install(args.python, wheel)
            info = horovod.check(args.python)
            print(f"installed Horovod {info['horovod']} for torch {info['torch']}: MPI "
                  + ("and NCCL" if info["nccl"] else "(CPU operations; no NCCL)"))
        return 0
    print(json.dumps(horovod.check(args.python), sort_keys=True))
    return 0
