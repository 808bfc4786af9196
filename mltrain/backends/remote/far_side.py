"""The remote cluster's side of a remote Slurm compute: run there as `python3 -c <this file's text> COMMAND ...`
over ssh (mltrain.backends.remote.ssh), so it works before mltrain itself is there. Standard library only, and
no mltrain import: it is what installs mltrain on the cluster.

Every command answers one JSON document on stdout; a failure is one line on stderr and exit status 3.

  probe                    the cluster's Python, $MLTRAIN_HOME (as the remote session sets it), sbatch, PATH
  missing                  stdin: digests (JSON list); answers those the cluster does not hold yet
  receive DEST             stdin: a tar of blobs/<sha256> files and manifest.json ({path: [digest, mode] or
                           {"link": target}}); each blob checked, then DEST made whole under another name and
                           renamed into place: a cut copy leaves only checked blobs for the next copy to skip
  python VENV REQS         a venv of the cluster's Python (system site-packages seen) with REQS installed
  start RUN PYTHON PATH    the run's driver, detached in its own session (it outlives the ssh connection)
  multirun DIR PYTHON PATH CWD ARG...
                           a sweep's or pipeline's driver (`python -m mltrain.cli.multirun REQUEST`, or its resume),
                           detached, run from CWD (the project sent over); the runs it makes listed in DIR/runs.txt,
                           its exit status in DIR/exit.code
  resume RUN PYTHON PATH   `mltrain runs resume RUN` there, detached; answers once the run shows its new attempt
  look RUN                 stdin: {file: offset, "_whole": [file]}; answers run.json, what each log file has past
                           its offset, and the files asked for whole
  follow DIR SWEEP OUTCOME stdin: {"log": offset}; a multirun driver's outcome, its log past the offset, the runs
                           it made, its exit status, and its sweep folder's sweep.json and summary.json
  cancel RUN               SIGTERM to the run's driver (it cancels the run as `run.cancel()` does)
  stop DIR                 SIGTERM to a multirun's driver (it cancels its members or steps, as Ctrl-C does)
  pack RUN SUB             a tar of RUN/SUB on stdout (not JSON)
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from typing import Any, Dict, List, NoReturn, Tuple

#: The most of one file a look sends, so one look stays short; the next look sends the rest.
CHUNK = 1 << 20
#: The most of the runs' files one answer of `looks` carries (8 MiB; base64 makes it a third more on the wire).
LOOKS_BUDGET = 8 << 20
#: The files a look follows: the run's logs, each rank's, and the metrics.
FOLLOWED = ("logs", "ranks", "metrics.jsonl")


def fail(text: str) -> NoReturn:
    sys.stderr.write(text.rstrip() + "\n")
    sys.exit(3)


def home() -> str:
    return os.path.abspath(os.path.expanduser(os.environ.get("MLTRAIN_HOME") or "~/.mltrain"))


def blobs() -> str:
    return os.path.join(home(), "remote", "blobs")


def probe(*paths: str) -> Dict[str, Any]:
    """`paths` (under the home): which of them are there, so that what is there already is not sent again."""
    out: Dict[str, Any] = {"python": sys.executable, "version": list(sys.version_info[:3]), "home": home(),
                           "sbatch": shutil.which("sbatch"), "path": os.environ.get("PATH", ""), "writable": None,
                           "there": {p: os.path.exists(os.path.join(home(), p)) for p in paths}}
    try:
        os.makedirs(blobs(), exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=blobs(), prefix=".probe-"):
            pass
        out["writable"] = True
    except OSError as exc:
        out["writable"] = f"{exc.strerror}: {exc.filename or home()}"
    return out


def missing() -> List[str]:
    wanted = json.load(sys.stdin)
    return [d for d in wanted if not os.path.isfile(os.path.join(blobs(), d))]


def _digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def receive(dest: str, *start_args: str) -> Dict[str, Any]:
    """`start_args` (PYTHON PYTHONPATH, or `multirun` PYTHON PYTHONPATH CWD): the driver started once its folder is
    whole (one call, not two)."""
    os.makedirs(blobs(), exist_ok=True)
    incoming = tempfile.mkdtemp(dir=blobs(), prefix=".incoming-")
    manifest: Dict[str, Any] = {}
    got = False
    try:
        with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tar:
            for member in tar:
                data = tar.extractfile(member) if member.isfile() else None
                if data is None:
                    continue
                if member.name == "manifest.json":
                    manifest, got = json.loads(data.read().decode("utf-8")), True
                    continue
                name = os.path.basename(member.name)
                if len(name) != 64 or not all(c in "0123456789abcdef" for c in name):
                    fail(f"not a blob: {member.name}")
                path = os.path.join(incoming, name)
                with open(path, "wb") as out:
                    shutil.copyfileobj(data, out)
                if _digest(path) != name:
                    fail(f"blob {name} arrived damaged")
                os.replace(path, os.path.join(blobs(), name))  # whole and checked, or not there at all
    except (tarfile.TarError, EOFError, OSError) as exc:
        fail(f"the copy was cut ({type(exc).__name__}: {exc}); the next submit sends the rest")
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
    if not got:
        fail("the copy was cut before its manifest; the next submit sends the rest")
    if os.path.exists(dest):
        return {"dest": dest, "made": False, **_started(dest, start_args)}
    parent = os.path.dirname(dest)
    os.makedirs(parent, exist_ok=True)
    partial = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(dest)}.partial-")
    try:
        for rel, entry in sorted(manifest.items()):
            path = os.path.join(partial, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if isinstance(entry, dict) and "dir" in entry:
                os.makedirs(path, exist_ok=True)
                continue
            if isinstance(entry, dict):
                os.symlink(entry["link"], path)
                continue
            digest, mode = entry
            blob = os.path.join(blobs(), digest)
            if not os.path.isfile(blob):
                fail(f"blob {digest} of {rel} is missing on the cluster")
            shutil.copyfile(blob, path)
            os.chmod(path, mode)
        os.rename(partial, dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return {"dest": dest, "made": True, **_started(dest, start_args)}


def _started(dest: str, start_args: Tuple[str, ...]) -> Dict[str, Any]:
    if not start_args:
        return {}
    if start_args[0] == "multirun":
        return multirun(dest, *start_args[1:])
    return start(dest, *start_args)


def python(venv: str, reqs: str) -> Dict[str, Any]:
    wanted = json.loads(reqs)
    target = os.path.join(venv, "bin", "python")
    if not os.path.exists(target):
        partial = venv + f".partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", partial],
                              capture_output=True, text=True)
        if made.returncode:
            fail(f"cannot make a venv with {sys.executable}: {made.stderr.strip().splitlines()[-1:]}")
        os.makedirs(os.path.dirname(venv), exist_ok=True)
        try:
            os.rename(partial, venv)
        except OSError:  # another submission made it meanwhile
            shutil.rmtree(partial, ignore_errors=True)
    ready = os.path.join(venv, ".mltrain-ready-" + hashlib.sha256(reqs.encode()).hexdigest()[:12])
    if os.path.exists(ready):
        return {"python": target}
    check = "import importlib.util, sys; sys.exit(0 if all(importlib.util.find_spec(m) for m in sys.argv[1:]) else 1)"
    modules = [m for _, m in wanted]
    if subprocess.run([target, "-c", check, *modules]).returncode:
        pip = subprocess.run([target, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              *[r for r, _ in wanted]], capture_output=True, text=True)
        if pip.returncode:
            last = (pip.stderr.strip().splitlines() or ["no output"])[-1]
            fail(f"installing mltrain's requirements on the cluster failed: {last}")
    open(ready, "w").close()  # the next probe finds it: no check, no call
    return {"python": target}


def start(run: str, py: str, pythonpath: str) -> Dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=pythonpath)
    log = os.path.join(run, "logs", "driver.log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen([py, "-m", "mltrain.python_api.driver", run], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=env, cwd=run)
    return {"pid": proc.pid}


def resume(run: str, py: str, pythonpath: str) -> Dict[str, Any]:
    """`mltrain runs resume RUN` there, detached (it follows the run to its end, as the run's first driver did);
    answers once the run's record there shows the new attempt, so the next look never reads the old end."""
    path = os.path.join(run, "run.json")

    def attempts() -> int:
        try:
            with open(path, encoding="utf-8") as f:
                return len(json.load(f).get("attempts") or [])
        except (OSError, ValueError):
            return -1

    before = attempts()
    env = dict(os.environ, PYTHONPATH=pythonpath)
    with open(os.path.join(run, "logs", "driver.log"), "ab") as out:
        proc = subprocess.Popen([py, "-m", "mltrain", "runs", "--root", os.path.dirname(run), "resume",
                                 os.path.basename(run)], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=env, cwd=run)
    deadline = time.time() + 60
    while attempts() <= before:
        if proc.poll() is not None:  # refused there (a run still going, a run never made): its own line
            with open(os.path.join(run, "logs", "driver.log"), "rb") as f:
                lines = f.read().decode("utf-8", "replace").strip().splitlines()
            fail(lines[-1] if lines else f"mltrain runs resume exited with {proc.returncode} there")
        if time.time() > deadline:
            fail("the run's resume there did not start within 60s")
        time.sleep(0.05)
    return {"pid": proc.pid}


#: What a multirun's driver there is told (mltrain.runs.record and mltrain.jobspec.computes read them): each run it
#: makes is listed in this file, and a compute's `login` names the cluster it runs on, so no member goes over again.
RUNS_MADE_ENV, ON_CLUSTER_ENV = "MLTRAIN_RUNS_MADE", "MLTRAIN_ON_CLUSTER"


def multirun(folder: str, py: str, pythonpath: str, cwd: str, *argv: str) -> Dict[str, Any]:
    """`py ARGV` (`-m mltrain.cli.multirun REQUEST`, or `-m mltrain runs resume SWEEP`), detached, from `cwd`; its exit
    status is written to FOLDER/exit.code when it ends (a resume writes no outcome of its own)."""
    env = dict(os.environ, PYTHONPATH=pythonpath, **{RUNS_MADE_ENV: os.path.join(folder, "runs.txt"),
                                                     ON_CLUSTER_ENV: "1"})
    if os.path.exists(os.path.join(folder, "exit.code")):  # an earlier attempt's end is not this one's
        os.unlink(os.path.join(folder, "exit.code"))
    # sh waits for the driver and keeps its exit status; the driver's own pid is the one a stop signals
    script = '"$@" & echo $! > "$0/driver.pid.new" && mv "$0/driver.pid.new" "$0/driver.pid"; wait $!; ' \
             'echo $? > "$0/exit.code.new" && mv "$0/exit.code.new" "$0/exit.code"'
    with open(os.path.join(folder, "driver.log"), "ab") as out:
        proc = subprocess.Popen(["sh", "-c", script, folder, py, *argv], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=env, cwd=cwd)
    deadline = time.time() + 30
    while not os.path.exists(os.path.join(folder, "driver.pid")) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    return {"pid": proc.pid}


def follow(folder: str, sweep_dir: str, outcome: str) -> Dict[str, Any]:
    offsets = json.load(sys.stdin)
    out: Dict[str, Any] = {"outcome": None, "log": None, "runs": [], "sweep": None, "summary": None, "exit": None,
                           "alive": False}
    for name, key in ((outcome, "outcome"), (os.path.join(sweep_dir, "sweep.json"), "sweep"),
                      (os.path.join(sweep_dir, "summary.json"), "summary"), ("exit.code", "exit")):
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                out[key] = json.load(f)
        except (OSError, ValueError):
            pass
    try:  # an outcome older than the driver running now is an earlier attempt's (a resumed sweep's first end)
        if os.path.getmtime(outcome) < os.path.getmtime(os.path.join(folder, "driver.pid")):
            out["outcome"] = None
    except OSError:
        pass
    try:
        with open(os.path.join(folder, "runs.txt"), encoding="utf-8") as f:
            out["runs"] = [line.strip() for line in f if line.strip()]
        with open(os.path.join(folder, "driver.log"), "rb") as f:
            f.seek(int(offsets.get("log", 0)))
            out["log"] = base64.b64encode(f.read(CHUNK)).decode("ascii")
    except OSError:
        pass
    try:
        with open(os.path.join(folder, "driver.pid"), encoding="utf-8") as f:
            os.kill(int(f.read().strip()), 0)
        out["alive"] = True
    except (OSError, ValueError):
        pass
    return out


def stop(folder: str) -> Dict[str, Any]:
    try:
        with open(os.path.join(folder, "driver.pid"), encoding="utf-8") as f:
            pid = int(f.read().strip())
        os.kill(pid, signal.SIGTERM)
        return {"signaled": pid}
    except (OSError, ValueError):
        return {"signaled": None}


def looks() -> Dict[str, Any]:
    """Several runs at one look (a sweep's members): stdin {run folder: its files' offsets}. Each file gives at most
    CHUNK, and the answer at most LOOKS_BUDGET in all; what is left comes at the next look."""
    asked = json.load(sys.stdin)
    budget = [LOOKS_BUDGET]
    return {run: _look(run, dict(offsets), budget) for run, offsets in asked.items()}


def _look(run: str, offsets: Dict[str, Any], budget: List[int]) -> Dict[str, Any]:
    files: Dict[str, List[Any]] = {}
    out: Dict[str, Any] = {"run": None, "files": files, "at": time.time(), "whole": {}}
    for name in offsets.pop("_whole", []):  # files asked for whole, once (a mirrored run's frozen job)
        try:
            with open(os.path.join(run, name), encoding="utf-8") as f:
                out["whole"][name] = f.read()
        except OSError:
            pass
    try:
        with open(os.path.join(run, "run.json"), encoding="utf-8") as f:
            out["run"] = json.load(f)
    except (OSError, ValueError):
        pass
    for top in FOLLOWED:
        base = os.path.join(run, top)
        paths = [base] if os.path.isfile(base) else [os.path.join(d, n) for d, _, ns in os.walk(base) for n in ns]
        for path in paths:
            rel = os.path.relpath(path, run)
            offset = int(offsets.get(rel, 0))
            try:
                if os.path.getsize(path) <= offset or budget[0] <= 0:
                    continue
                with open(path, "rb") as f:
                    f.seek(offset)
                    data = f.read(min(CHUNK, budget[0]))
            except OSError:
                continue
            budget[0] -= len(data)
            files[rel] = [offset, base64.b64encode(data).decode("ascii")]
    return out


def cancel(run: str) -> Dict[str, Any]:
    try:
        with open(os.path.join(run, "run.json"), encoding="utf-8") as f:
            pid = json.load(f).get("driver_pid")
    except (OSError, ValueError):
        fail(f"no run at {run} on the cluster")
    try:
        os.kill(int(pid), signal.SIGTERM)
        return {"signaled": pid}
    except (TypeError, ValueError, ProcessLookupError, PermissionError):
        return {"signaled": None}


def pack(run: str, sub: str) -> None:
    path = os.path.normpath(os.path.join(run, sub))
    if not (path == run or path.startswith(run + os.sep)):
        fail(f"{sub} is not inside the run's folder")
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|") as tar:
        if os.path.exists(path):  # one the run does not have brings nothing: the caller says what is missing
            tar.add(path, arcname=os.path.relpath(path, run))


def main(argv: List[str]) -> None:
    commands: Dict[str, Any] = {"probe": probe, "missing": missing, "receive": receive, "python": python, "start": start,
                                "multirun": multirun, "looks": looks, "follow": follow, "cancel": cancel, "stop": stop,
                                "resume": resume}
    if argv[0] == "pack":
        pack(*argv[1:])
        return
    json.dump(commands[argv[0]](*argv[1:]), sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
