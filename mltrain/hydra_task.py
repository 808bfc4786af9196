"""Plain Hydra apps on the mltrain launcher: the task function runs in the rank processes.

The driver pickles (cloudpickle, as submitit does) the task function, the Hydra context, the
member's config and the app's custom OmegaConf resolvers into the run directory; each rank runs
them through Hydra's own run_job and pickles its JobReturn back. Run as `python -m mltrain.hydra_task`.
"""
from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path
from typing import Any, List

# Resolvers every Hydra process registers for itself (setup_globals) or OmegaConf ships.
_BUILTIN_RESOLVERS = ("now", "hydra", "python_version")


def _custom_resolvers() -> dict:
    import cloudpickle
    from omegaconf.basecontainer import BaseContainer

    out = {}
    for name, fn in BaseContainer._resolvers.items():
        if name.startswith("oc.") or name in _BUILTIN_RESOLVERS:
            continue
        try:
            cloudpickle.dumps(fn)
        except Exception:  # an unpicklable resolver stays behind; the rank reports it if used
            continue
        out[name] = fn
    return out


def run_hydra_tasks(launcher: Any, configs: List[Any], jobs: List[Any]) -> list:
    import cloudpickle
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobReturn, JobStatus

    from mltrain.errors import RunFailed
    from mltrain.launching import execute_all

    resolvers = _custom_resolvers()
    payloads = [
        cloudpickle.dumps(
            {"task_function": launcher.task_function, "hydra_context": launcher.hydra_context,
             "config": cfg, "resolvers": resolvers, "singletons": Singleton.get_state()}
        )
        for cfg in configs
    ]
    results = execute_all(jobs, payloads)
    returns = []
    for cfg, result in zip(configs, results):
        path = Path(result.run_dir) / "returns" / "rank_0.pkl"
        if path.is_file():
            with open(path, "rb") as f:
                returns.append(pickle.load(f))
            continue
        ret = JobReturn(overrides=list(result.job.overrides), hydra_cfg=cfg, working_dir=result.run_dir)
        ret.status = JobStatus.FAILED
        ret.return_value = RunFailed(f"run {result.job.run_id} {result.status}: {result.error}")
        returns.append(ret)
    return returns


def main() -> None:
    import cloudpickle  # noqa: F401  (registers what unpickling the payload needs)
    from hydra.core.singleton import Singleton
    from hydra.core.utils import JobStatus, run_job, setup_globals
    from omegaconf.basecontainer import BaseContainer

    from mltrain.records import atomic_write_bytes

    run_dir = Path(os.environ["MLTRAIN_RUN_DIR"])
    rank = int(os.environ.get("RANK", "0"))
    with open(run_dir / "task.pkl", "rb") as f:
        payload = pickle.load(f)
    setup_globals()
    # JobRuntime, ConfigStore and Hydra's version base live in singletons the driver filled in.
    Singleton.set_state(payload["singletons"])
    for name, fn in payload["resolvers"].items():
        BaseContainer._resolvers.setdefault(name, fn)
    ret = run_job(
        hydra_context=payload["hydra_context"],
        task_function=payload["task_function"],
        config=payload["config"],
        job_dir_key="hydra.sweep.dir",
        job_subdir_key="hydra.sweep.subdir",
    )
    out = run_dir / "returns"
    out.mkdir(exist_ok=True)
    try:
        data = cloudpickle.dumps(ret)
    except Exception as exc:  # an unpicklable return value is reported, not lost silently
        ret._return_value, ret.status = RuntimeError(f"return value cannot be pickled: {exc}"), JobStatus.FAILED
        data = cloudpickle.dumps(ret)
    atomic_write_bytes(out / f"rank_{rank}.pkl", data)
    if ret.status == JobStatus.FAILED:
        import traceback

        traceback.print_exception(ret._return_value)
        sys.exit(1)


if __name__ == "__main__":
    main()
