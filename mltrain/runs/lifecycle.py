"""The end of every run, whatever ran it: Finalizing, the outputs manifest, the final status, one
summary line. Backends call finish() once they know how the ranks ended."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

from mltrain.jobspec.records import OutputFile
from mltrain.jobspec.status import FAILED, FINALIZING
from mltrain.runs.console import Console, RunLog
from mltrain.runs.record import RunRecord


def outputs_manifest(outputs: Path) -> List[OutputFile]:
    """What the run produced: the outputs/ files with their sizes."""
    files: List[OutputFile] = []
    for path in sorted(outputs.rglob("*")):
        if path.is_file():
            files.append({"path": str(path.relative_to(outputs)), "bytes": path.stat().st_size})
    return files


def finish(record: RunRecord, status: str, error: Optional[str] = None, failed_rank: Optional[int] = None,
           console: Optional[Console] = None, at: Optional[float] = None) -> str:
    """Record the run's end (at `at` when the backend knows when it ended) and say it on the console."""
    log = RunLog(record.log_path(), console)
    record.set_status(FINALIZING, at=at)
    log.info(FINALIZING, show=True)
    fields: Dict[str, object] = {"outputs": outputs_manifest(record.dir / "outputs"), "error": error}
    if failed_rank is not None:
        fields["failed_rank"] = failed_rank
    record.set_status(status, at=at, **fields)
    ran, waited = record.times()
    waited_text = f", after {waited:.1f}s waiting" if waited >= 0.05 else ""
    log.info(f"{status} in {ran:.1f}s{waited_text}  {record.dir}", show=True)
    if error and status == FAILED and console is not None:
        console.status(error)
    return status
