"""GPU slots in a packed worker (`compute.pack_slots=K`): one worker job runs K members at once, each pinned to
its own share of the worker's devices, instead of one member at a time on an allocation K times larger than
it uses (hydra #2632, submitit #1734: several trials in one allocation).

The worker asks Slurm for K times one member's GPUs, CPUs and memory (pack_driver.worker_params); Slurm sets
the worker's CUDA_VISIBLE_DEVICES; slot s runs its members with the s-th of K equal parts of that list. Each
slot is a thread running the worker's own loop (PackWorker.serve: claim, make, run, release), so the queue,
a member's cancel, a lost worker and resume work as with one slot. Slurm's USR2 (the time limit, a preemption)
reaches the main thread only: the slots block it, so their programs start with it blocked too (a signal mask
goes through fork and exec), and the main thread passes it on to every running member as an unpacked rank
does (SIGUSR1 and checkpoint_requested) before submitit's own handler requeues the worker, whose
checkpoint puts every member under way back in the queue.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, Dict, List, Optional

if TYPE_CHECKING:
    from mltrain.backends.slurm.pack import PackWorker
    from mltrain.backends.slurm.rank import SlurmRank


def slot_devices(visible: Optional[str], slots: int) -> List[Optional[str]]:
    """Each slot's CUDA_VISIBLE_DEVICES: K equal parts of the worker's, in order; None for every slot where the
    worker has no devices (nothing to pin) or fewer than one per slot (Slurm gave it less than asked: said
    by leaving them unpinned rather than running two members on one device unasked)."""
    devices = [d.strip() for d in (visible or "").split(",") if d.strip()]
    share = len(devices) // slots if slots else 0
    if not share:
        return [None] * slots
    return [",".join(devices[s * share:(s + 1) * share]) for s in range(slots)]


def deal(slots: int, gpus_per_member: int) -> List[str]:
    """How a worker's devices are dealt to its slots, for the dry run (the worker's own ordinals, which Slurm
    maps to the node's devices)."""
    if not gpus_per_member:
        return [f"slot {s}: no GPU" for s in range(slots)]
    return [f"slot {s}: the worker's GPUs {','.join(str(s * gpus_per_member + i) for i in range(gpus_per_member))}"
            for s in range(slots)]


def serve(worker: PackWorker, owner: str, started: float, stopping: threading.Event) -> None:
    """Run the worker's K slots until each has nothing left to take."""
    # imported here, not in the signal handler below, which imports nothing
    from mltrain.backends.slurm.rank import CHECKPOINT_WAIT_S  # startup

    running: Dict[int, SlurmRank] = {}
    previous = signal.getsignal(signal.SIGUSR2)

    def passed_on(signum: int, frame: Optional[FrameType]) -> None:
        # first: a member whose program ends on its SIGUSR1 goes back to the queue, as one would whose worker
        # exits in the handler below while it runs (a slot's thread carries on meanwhile, and would record it
        # Completed), and no slot takes another member
        stopping.set()
        ranks = list(running.values())
        for rank in ranks:
            rank.pass_checkpoint_signal(signum, frame)  # SIGUSR1 and checkpoint_requested, as an unpacked rank
        # Then their ends and last lines, as an unpacked rank's checkpoint() waits for its program's: the worker
        # exits in submitit's handler below, and a line a program printed as it saved was lost with it (CI of
        # 2026-12-07: one of two members' "got SIGUSR1" never reached its log)
        deadline = time.monotonic() + CHECKPOINT_WAIT_S
        for rank in ranks:
            rank.await_program(max(0.0, deadline - time.monotonic()))
        if callable(previous):
            previous(signum, frame)  # submitit: the worker's checkpoint() requeues what is under way

    signal.signal(signal.SIGUSR2, passed_on)
    envs = slot_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), worker.slots)
    # daemons: a worker requeued from the handler above exits without waiting for programs it has signalled
    threads = [threading.Thread(target=_slot, args=(worker, owner, started, stopping, s, env, running), daemon=True,
                                name=f"slot-{s}") for s, env in enumerate(envs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():  # in short waits: the main thread must stay free to run signal handlers
            thread.join(0.2)


def _slot(worker: PackWorker, owner: str, started: float, stopping: threading.Event, slot: int, devices: Optional[str],
          running: Dict[int, SlurmRank]) -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
    env = {"CUDA_VISIBLE_DEVICES": devices} if devices is not None else None
    worker.serve(owner, started, stopping, slot, env, running)
