"""Runs a user's script as `python script.py ARGS` would, then ends the process without the interpreter's
native teardown.

A rank runs `python <this file> script.py ARGS` (mltrain.launch.programs). The script runs in the real
`__main__` module, with `sys.argv`, `sys.path[0]`, `__file__` and exceptions as plain `python script.py`
gives them, so pickling, multiprocessing and `if __name__ == "__main__":` behave the same. When it ends, what
Python's own exit does for the program is done here in the same order (wait for non-daemon threads, run
the `atexit` functions, finalize MPI if mpi4py started it, drop `__main__`'s objects so that files left open are flushed and closed, flush
stdio), and then the process leaves with `os._exit` and the script's own exit code.

Why: after a script has finished, C++ static destructors and library threads torn down at `exit()` can
still kill the process. A correct 2-rank gloo DDP script that calls `dist.destroy_process_group()` died
with "terminate called without an active exception" (SIGABRT) after saving its model in about 1 of 16
runs (torchrun: 4 of 16), and the run, or a sweep member's good result, was then recorded Failed. Skipping
native teardown is what `os._exit` is for; everything Python-level that a script can rely on at exit still
runs. A real failure is unchanged: an uncaught exception prints its traceback and exits 1, `sys.exit(n)`
exits n, a signal before the end kills the process as before.

Only the standard library is imported: this file also runs under an environment's interpreter that has no
mltrain installed.
"""
import atexit
import gc
import os
import signal
import sys
import threading
import tokenize
import traceback


def finish(code, collect=True, _os=os, _sys=sys, _atexit=atexit, _gc=gc, _threading=threading, _traceback=traceback):
    # Names are bound as defaults: the script's run clears and refills this module's globals.
    try:
        shutdown = getattr(_threading, "_shutdown", None)
        if shutdown is not None:
            shutdown()
    except BaseException:  # noqa: B036 - a thread's failure must not change how the script ended
        _traceback.print_exc()
    try:
        _atexit._run_exitfuncs()
    except BaseException:  # noqa: B036 - Python itself only prints an atexit function's error
        _traceback.print_exc()
    # mpi4py finalizes MPI from a C-level exit hook (Py_AtExit) that os._exit would skip; mpirun then
    # reports the rank as ended without MPI_Finalize
    mpi = _sys.modules.get("mpi4py.MPI")
    if mpi is not None:
        try:
            if mpi.Is_initialized() and not mpi.Is_finalized():
                mpi.Finalize()
        except BaseException:  # noqa: B036 - as above: the script's exit code stands
            _traceback.print_exc()
    if collect:  # files a script left open are flushed and closed as the interpreter's exit would
        main = _sys.modules.get("__main__")
        if main is not None:
            main.__dict__.clear()
        _gc.collect()
    for stream in (_sys.stdout, _sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: B036 - a closed stream: nothing left to lose
            pass
    _os._exit(code)


def exit_code_of(exc, _sys=sys):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    # sys.exit("message") prints the message and exits 1, as the interpreter does
    print(code, file=_sys.stderr)
    return 1


def _report(exc, script, _sys=sys, _traceback=traceback):
    # The traceback starts at the script, as `python script.py` prints it (this file's frames left out).
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    if tb is not None:
        exc = exc.with_traceback(tb)  # the hook prints the exception's own traceback, not its argument
    _sys.excepthook(type(exc), exc, exc.__traceback__)


def main(_sys=sys, _os=os, _tokenize=tokenize, signal=signal, finish=finish, exit_code_of=exit_code_of, _report=_report):
    if len(_sys.argv) < 2:
        print("usage: python script_main.py SCRIPT [ARGS...]", file=_sys.stderr)
        _os._exit(2)
    script = _os.path.abspath(_sys.argv[1])
    _sys.argv = _sys.argv[1:]
    _sys.path[0] = _os.path.dirname(_os.path.realpath(script))
    try:
        with _tokenize.open(script) as f:
            source = f.read()
        code_obj = compile(source, script, "exec", dont_inherit=True)
    except OSError as exc:
        print(f"{_sys.executable}: can't open file {script!r}: [Errno {exc.errno}] {exc.strerror}", file=_sys.stderr)
        _os._exit(2)
    except SyntaxError as exc:
        # as `python script.py` shows it: the script's file and line only (the hook prints the exception's
        # own traceback, which would start at this file's compile() call)
        exc = exc.with_traceback(None)
        _sys.excepthook(type(exc), exc, None)
        _sys.stderr.flush()
        _os._exit(1)
    namespace = _sys.modules["__main__"].__dict__
    builtins = namespace["__builtins__"]
    namespace.clear()
    namespace.update(__name__="__main__", __file__=script, __builtins__=builtins, __doc__=None,
                     __spec__=None, __loader__=None, __package__=None, __cached__=None)
    try:
        exec(code_obj, namespace)
        code = 0
    except SystemExit as exc:
        code = exit_code_of(exc)
    except KeyboardInterrupt:
        # as the interpreter does: end by SIGINT itself, so the parent sees the signal
        _sys.stdout.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        _os.kill(_os.getpid(), signal.SIGINT)
        code = 130
    except BaseException as exc:  # noqa: B036 - every uncaught error is reported, then exit 1
        _report(exc, script)
        code = 1
    finish(code)


if __name__ == "__main__":
    main()
