"""Plain Hydra apps on the mltrain launcher, rank side: `python -m mltrain.hydra_task` (a re-export of
this module, the name job.json files hold) unpickles the task function and runs it through Hydra's
own run_job, then pickles its JobReturn for the driver (mltrain.launch.hydra_app)."""
from __future__ import annotations

import os
import pickle
import sys
import traceback
from pathlib import Path

import cloudpickle  # registers what unpickling the payload needs
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus, run_job, setup_globals

from mltrain.base.atomic import atomic_write_bytes
from mltrain.config.hydra_internals import failed_job_error, restore_singletons
from mltrain.config.omegaconf_internals import add_resolvers


def prepare():
    """The task's entry point. A Slurm task imports this module (and with it Hydra) and calls this
    before it forks the rank (mltrain.backends.slurm.rank), so the fork finds Hydra already loaded,
    and Hydra's plugins already found: a packed worker forks one task after another (mltrain.backends.slurm.pack),
    and each would otherwise scan every installed plugin again (Singleton.set_state does)."""
    Plugins.instance()
    return main


def main() -> None:
    run_dir = Path(os.environ["MLTRAIN_RUN_DIR"])
    rank = int(os.environ.get("RANK", "0"))
    with open(run_dir / "task.pkl", "rb") as f:
        payload = pickle.load(f)
    if "shared" in payload:
        payload = {**pickle.loads(payload["shared"]), "config": payload["config"]}
    setup_globals()
    # JobRuntime, ConfigStore and Hydra's version base live in singletons the driver filled in; the
    # plugins this process found already (prepare()) are kept: set_state finds them again otherwise.
    restore_singletons({"state": payload["singletons"], "scanned": True})  # the driver's, after its scan
    add_resolvers(payload["resolvers"])
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
        data = _pickled(ret)
    except Exception as exc:  # an unpicklable return value is reported, not lost silently
        ret.return_value, ret.status = RuntimeError(f"return value cannot be pickled: {exc}"), JobStatus.FAILED
        data = _pickled(ret)
    atomic_write_bytes(out / f"rank_{rank}.pkl", data)
    if ret.status == JobStatus.FAILED:
        traceback.print_exception(failed_job_error(ret))
        sys.exit(1)


def _pickled(ret: JobReturn) -> bytes:
    """The JobReturn with its hydra_cfg pickled apart, which the driver unpickles only if it is read
    (mltrain.launch.hydra_app._Returned): the whole Hydra config is most of the time the driver spends on it."""
    hydra_cfg, ret.hydra_cfg = ret.hydra_cfg, None
    try:
        return cloudpickle.dumps({"return": ret, "hydra_cfg": cloudpickle.dumps(hydra_cfg)})
    finally:
        ret.hydra_cfg = hydra_cfg


if __name__ == "__main__":
    main()
