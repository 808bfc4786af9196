"""Plain Hydra apps on the mltrain launcher, driver side: the task function runs in the ranks.

The driver pickles (cloudpickle, as submitit does) the task function, the Hydra context, the
member's config and the app's custom OmegaConf resolvers into the run directory; each rank runs
them through Hydra's own run_job (mltrain.ranks.hydra_app_rank) and pickles its JobReturn back.
"""
from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, List

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus

from mltrain.base.errors import RunFailed
from mltrain.config.omegaconf_internals import custom_resolvers

# Resolvers every Hydra process registers for itself (setup_globals) or OmegaConf ships.
_BUILTIN_RESOLVERS = ("now", "hydra", "python_version")


def _custom_resolvers() -> dict:
    import cloudpickle  # startup

    out = {}
    for name, fn in custom_resolvers().items():
        if name.startswith("oc.") or name in _BUILTIN_RESOLVERS:
            continue
        try:
            cloudpickle.dumps(fn)
        except Exception:  # an unpicklable resolver stays behind; the rank reports it if used
            continue
        out[name] = fn
    return out


def payloads(launcher: Any, configs: List[Any]) -> List[bytes]:
    """What each member's ranks unpickle. The parts every member shares are pickled once."""
    import cloudpickle  # startup

    shared = cloudpickle.dumps({"task_function": launcher.task_function, "hydra_context": launcher.hydra_context,
                                "resolvers": _custom_resolvers(), "singletons": Singleton.get_state()})
    return [cloudpickle.dumps({"shared": shared, "config": cfg}) for cfg in configs]


def job_returns(configs: List[Any], results: List[Any]) -> list:
    """Each member's JobReturn, as its rank 0 pickled it (or a failed one if it never did)."""
    returns = []
    for cfg, result in zip(configs, results):
        path = Path(result.run_dir) / "returns" / "rank_0.pkl"
        if path.is_file():
            with open(path, "rb") as f:
                saved = pickle.load(f)
            # an older rank pickled the JobReturn whole
            returns.append(_Returned(saved["return"], saved["hydra_cfg"]) if isinstance(saved, dict) else saved)
            continue
        ret = JobReturn(overrides=list(result.job.overrides), hydra_cfg=cfg, working_dir=result.run_dir)
        ret.status = JobStatus.FAILED
        ret.return_value = RunFailed(f"run {result.job.run_id} {result.status}: {result.error}")
        returns.append(ret)
    return returns


class _Returned(JobReturn):
    """A rank's JobReturn whose `hydra_cfg`, the member's whole Hydra config, is unpickled when first read (the rank
    pickles it apart: mltrain.ranks.hydra_app_rank): 3 to 7 ms a member, 3 to 7 s at the end of a 1,000-member
    sweep, for a value Hydra's own sweepers never read."""

    def __init__(self, ret: JobReturn, hydra_cfg: bytes) -> None:
        self.__dict__.update({k: v for k, v in vars(ret).items() if k != "hydra_cfg"})
        self._hydra_bytes = hydra_cfg

    @property  # type: ignore[override]
    def hydra_cfg(self) -> Any:
        if "_hydra_cfg" not in self.__dict__:
            self.__dict__["_hydra_cfg"] = pickle.loads(self._hydra_bytes)
        return self.__dict__["_hydra_cfg"]

    @hydra_cfg.setter
    def hydra_cfg(self, value: Any) -> None:
        self.__dict__["_hydra_cfg"] = value
