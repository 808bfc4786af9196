"""The slurm backend's part of a run's record: the Slurm job the run is, under `"slurm"` in run.json
(mltrain.jobspec.records.RunDoc.backend_parts)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Optional

if TYPE_CHECKING:
    from mltrain.runs.record import RunRecord


#: The key of this backend's part: its name (mltrain.backends.BACKENDS).
NAME = "slurm"


@dataclass
class SlurmJob:
    job_id: str
    submitit_folder: Optional[str] = None

    def to_parts(self) -> Dict[str, Dict[str, Any]]:
        """The record's `backend_parts` with this job in it."""
        return {NAME: dataclasses.asdict(self)}


def slurm_job(record: RunRecord) -> Optional[SlurmJob]:
    """The run's Slurm job, once it was submitted."""
    part = record.doc.backend_parts.get(NAME) or {}
    if not part.get("job_id"):
        return None
    return SlurmJob(str(part["job_id"]), part.get("submitit_folder"))
