"""Azure ML's run statuses, in lifecycle order.

NotStarted: the run directory exists. Preparing: its environment is built or checked. Queued: it
waits for compute (a free local slot, a Slurm allocation). Running, Finalizing, then one final
status. A requeued Slurm job goes back to Queued; its first time in each phase is kept.
"""
NOT_STARTED, PREPARING, QUEUED, RUNNING, FINALIZING = "NotStarted", "Preparing", "Queued", "Running", "Finalizing"
COMPLETED, FAILED, CANCELED = "Completed", "Failed", "Canceled"
TERMINAL = (COMPLETED, FAILED, CANCELED)
ORDER = (NOT_STARTED, PREPARING, QUEUED, RUNNING, FINALIZING, COMPLETED, FAILED, CANCELED)


def exit_code(status: str) -> int:
    """The `mltrain` command's exit code for a run (or a sweep's worst member) ending in `status`."""
    return {COMPLETED: 0, CANCELED: 130}.get(status, 1)
