"""Put first on a script rank's PYTHONPATH by mltrain (distribution.close_process_group=true, the default).

A script that initializes torch.distributed and never calls destroy_process_group() can abort at exit
("terminate called without an active exception", SIGABRT) when gloo's connections are torn down during
interpreter shutdown after a peer has already gone; fail-fast then kills the other ranks and a run whose
work was done ends Failed (torchrun has the same flaw). Destroying a process group the script left open,
from an exit hook that runs before that teardown, removes the race.

This file must stay importable without mltrain and must not import torch: it runs in every Python the
rank starts. It shadows any other sitecustomize on the path, so it runs that one too.
"""
import atexit
import importlib.machinery
import importlib.util
import os
import sys


def _close_process_group() -> None:
    dist = sys.modules.get("torch.distributed")  # never import torch here: only close what the script opened
    if dist is None:
        return
    try:
        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - exiting anyway; a failed close must not change the exit status
        pass
    _skip_native_destructors()


def _skip_native_destructors() -> None:
    """After Python's own exit work, leave at C's exit() before the C++ static destructors run.

    Even with its process group destroyed, a finished rank can die in those destructors (gloo's threads:
    "terminate called without an active exception", SIGABRT), and a run whose work was done ends Failed.
    A `job=script` rank avoids them entirely (mltrain/ranks/script_main.py); a command's `python` gets
    this: glibc's on_exit() hands a handler the status given to exit(), so `_exit(status)`, registered
    now (after every library's destructors were registered at load), runs first and keeps the status.
    C stdio is flushed first (handlers run in reverse order of registration)."""
    if os.environ.get("MLTRAIN_NATIVE_TEARDOWN") == "1":
        return
    try:
        import ctypes  # startup

        libc = ctypes.CDLL(None)
        if libc.on_exit(libc._exit, None) == 0:
            libc.__cxa_atexit(libc.fflush, None, None)
    except (OSError, AttributeError):  # not glibc: the ordinary exit
        pass


def _run_shadowed_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


atexit.register(_close_process_group)
_run_shadowed_sitecustomize()
