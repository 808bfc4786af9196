"""mltrain.signals: a signal that arrives while the main thread holds the event's own lock (a second SIGTERM
inside the first one's Event.set) sets the event and returns; a handler that called Event.set() there
deadlocked a sweep driver, which then never stopped its trials."""
from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import os, signal, sys, threading
from mltrain.signals import SignalsSetEvent
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
    old = SCRIPT.replace("from mltrain.signals import SignalsSetEvent", "").replace(
        "with SignalsSetEvent(event) as taken:", "signal.signal(signal.SIGTERM, lambda s, f: event.set())\nif True:")
    old = old.replace('"signum", taken.signum, ', "")
    try:
        subprocess.run([sys.executable, "-c", old], capture_output=True, text=True, timeout=5)
        hung = False
    except subprocess.TimeoutExpired:
        hung = True
    assert hung
