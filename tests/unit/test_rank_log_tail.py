"""On Slurm the driver shows the ranks' lines by following their log files (issue 63): a read of a log may end
inside a line still being written, and that part waits for its end (or for the rank's end) instead of being shown
at once, where the next rank's line would join it. Real log files, the driver's own followers."""
import io

from mltrain.backends.base import Plan
from mltrain.backends.slurm.driver import rank_streams
from mltrain.runs.console import Console
from mltrain.runs.record import RunRecord

from .jobs import frozen_job


def test_a_part_of_a_line_in_a_rank_log_waits_for_its_end(tmp_path):
    job = frozen_job("slurm", run_dir=str(tmp_path / "r1"), console="all")
    record = RunRecord.create(job)
    shown = io.StringIO()
    streams = rank_streams(Plan(job, []), record, Console(stream=shown))
    logs = [record.log_path(rank) for rank in (0, 1)]
    for log in logs:
        log.parent.mkdir(parents=True, exist_ok=True)

    def write(rank: int, text: str, final: bool = False) -> None:
        with open(logs[rank], "a") as f:
            f.write(text)
        for stream in streams:
            stream.pump(final)

    write(0, "rank 0 sees")  # the read ends here: the rest of rank 0's line is not written yet
    write(1, "rank 1 sees its line\n")
    write(0, " its line\nrank 0 ends without a line end")
    write(1, "", final=True)
    assert shown.getvalue().splitlines() == ["[rank 1] rank 1 sees its line", "rank 0 sees its line",
                                             "rank 0 ends without a line end"]
