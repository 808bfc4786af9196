"""Names of the v1 SDK that mltrain does not run: importing one is one line saying so (a module's
__getattr__ turns the name into this refusal), never a bare ImportError or AttributeError."""
from __future__ import annotations

from typing import Any, Dict


class NotInStandInImport(NotImplementedError):
    """Raised at `from azureml.x import Name` for a name mltrain does not run. Not an AttributeError:
    Python would turn that into a bare `cannot import name` ImportError."""


def module_getattr(module: str, refused: Dict[str, str]) -> Any:
    """A module-level __getattr__: the refused names say what to use instead; other names are absent."""

    def __getattr__(name: str) -> Any:
        if name in refused:
            raise NotInStandInImport(f"{module}.{name} is not available in mltrain's Azure ML stand-in: "
                                     f"{refused[name]}")
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


SCHEDULE = ("schedule a published pipeline with cron or your cluster's scheduler: `PublishedPipeline.get(ws, id)"
            ".submit(ws, experiment_name)` in a script, or a POST to its endpoint while `mltrain ui` runs")
OTHER_COMPUTE = "describe the machine or cluster in .mltrain/compute/NAME.yaml (local or Slurm)"
