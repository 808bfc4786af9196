"""mltrain.base.signals: a signal that arrives while the main thread holds the event's own lock (a second SIGTERM
inside the first one's Event.set) sets the event and returns; a handler that called Event.set() there
deadlocked a sweep driver, which then never stopped its trials."""
from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import os, signal, sys, threading
from mltrain.base.signals import SignalsSetEvent
event = threading.Event()
with SignalsSetEvent(event) as taken:
    with event._cond:  # what Event.set() holds while it runs
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
    print("set", event.wait(5), "signum", taken.signum, flush=True)
print("default handler back", signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, flush=True)
"""


def test_a_signal_inside_the_events_own_lock_sets_it_without_deadlock():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"set True signum {int(__import__('signal').SIGTERM)}",
                                        "default handler back True"]


def test_the_old_handler_deadlocked_there():
    """The same signals with a handler that calls Event.set() itself: the process hangs (killed at 5 s)."""
    old = SCRIPT.replace("from mltrain.base.signals import SignalsSetEvent", "").replace(
        "with SignalsSetEvent(event) as taken:", "signal.signal(signal.SIGTERM, lambda s, f: event.set())\nif True:")
    old = old.replace('"signum", taken.signum, ', "")
    try:
        subprocess.run([sys.executable, "-c", old], capture_output=True, text=True, timeout=5)
        hung = False
    except subprocess.TimeoutExpired:
        hung = True
    assert hung


#: A Slurm task's rank wrapper (mltrain.backends.slurm.rank.SlurmRank) with its program running and its main thread in
#: the program's Popen.wait(), as in a real task. Slurm's SIGCONT arrives first; submitit's handler for it logs,
#: and the USR2 of the time limit arrives during that log call. submitit's USR2 handler (here `refuse`, as
#: submitit's checkpoint_and_try_requeue does it) calls the rank's checkpoint() and, out of requeues, raises
#: UncompletedJobError. The program exits 0 on its SIGUSR1.
RANK_SCRIPT = """
import logging, os, signal, sys, time
from pathlib import Path
from submitit.core.utils import UncompletedJobError
from mltrain.backends.slurm.rank import SlurmRank
from mltrain.ranks.process import run_program

run_dir = Path(sys.argv[1])
(run_dir / "logs").mkdir()
rank = SlurmRank(str(run_dir))
took = {}

def refuse(signum, frame):
    start = time.monotonic()
    rank.checkpoint()
    took["checkpoint"] = time.monotonic() - start
    raise UncompletedJobError("Job not requeued because: timed-out too many times.")

class UsrTwoWhileLogging(logging.StreamHandler):  # submitit logs to a stream; its emit() hands errors to handleError
    def format(self, record):
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.2)  # the USR2 handler runs here, inside this log call
        return super().format(record)

log = logging.getLogger("submitit-like")
log.addHandler(UsrTwoWhileLogging())
log.propagate = False
signal.signal(signal.SIGCONT, lambda s, f: log.warning("Bypassing signal SIGCONT"))

def started(proc):
    rank._proc = proc
    signal.signal(signal.SIGUSR2, lambda s, f: rank._checkpoint_signal(s, f, refuse))
    signal.setitimer(signal.ITIMER_REAL, 1.0)  # SIGCONT a second later, with the program waiting

signal.signal(signal.SIGALRM, lambda s, f: os.kill(os.getpid(), signal.SIGCONT))
program = "import signal, sys, time\\nsignal.signal(signal.SIGUSR1, lambda s, f: sys.exit(0))\\nprint('waiting', flush=True)\\ntime.sleep(60)"
code = run_program([sys.executable, "-c", program], str(run_dir), dict(os.environ), run_dir / "logs" / "rank_0.log",
                   on_start=started)
print("program exit", code, "refusal kept", type(rank._not_requeued).__name__, "checkpoint under 5 s",
      took.get("checkpoint", 99) < 5, flush=True)
"""


def test_a_refusal_to_requeue_during_another_handlers_log_still_ends_the_task(tmp_path):
    """Before, the refusal was raised through the log call, and logging's handleError swallowed it: the program's
    exit 0 followed and a run that had timed out ended Completed (CI, 2026-11-27). It is now kept for
    SlurmRank.__call__ to raise once the program has ended. And the checkpoint no longer waits out its 10 s in
    Popen.wait(), whose lock the main thread holds: it sees the program's output end."""
    done = subprocess.run([sys.executable, "-c", RANK_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "program exit 0 refusal kept UncompletedJobError checkpoint under 5 s True"
