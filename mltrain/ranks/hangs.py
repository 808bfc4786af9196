"""A hung run found and explained: no rank has made progress for `run.hang_timeout_min`.

Progress is what a user would call it: a rank's output (logs/rank_<N>.log grows), a metric it logged (a line of
metrics.jsonl that is not one of mltrain's own system/ samples), a checkpoint written (checkpoints/), or an explicit
heartbeat (`mltrain.run.heartbeat()`, which touches heartbeat/rank_<N>). NCCL has no watchdog that says which
rank hangs (NVIDIA/nccl #1260); a collective that never completes looks exactly like this: every rank silent.

When the run is hung, the Python stack of every rank's processes is taken with py-spy (`py-spy dump`: ptrace, so
it needs no change to the user's script and works on a rank that ignores signals or sits in native code), written
to logs/stacks.txt, and summarised in one line that names the ranks that were not where the others were, with
their innermost frame in the user's code: `rank 1 on n2: train.py:118 in <module>; rank 0 waits in all_reduce
(train.py:121)`.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from mltrain.base.atomic import atomic_write
from mltrain.runs.metrics import SYSTEM_PREFIX, read_new

#: How long one py-spy dump may take before it is given up (a stack capture must not hang itself).
DUMP_TIMEOUT_S = 20.0
#: Where py-spy is when it is not beside mltrain's interpreter nor on PATH.
PY_SPY_ENV = "MLTRAIN_PY_SPY"
HEARTBEAT_DIR = "heartbeat"
STACKS_FILE = "stacks.txt"


class Progress:
    """Whether a run's ranks have done anything since the last look."""

    def __init__(self, run_dir: Path, timeout_s: float) -> None:
        self.dir, self.timeout_s = run_dir, timeout_s
        self._metrics_offset = 0
        self._signature: Tuple[object, ...] = ()
        self.last = time.monotonic()

    def _files(self) -> Tuple[object, ...]:
        out: List[object] = []
        for folder, pattern in (("logs", "rank_*.log"), (HEARTBEAT_DIR, "*"), ("checkpoints", "**/*")):
            for path in sorted((self.dir / folder).glob(pattern)):
                try:
                    st = path.stat()
                except OSError:
                    continue
                out.append((path.name, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def _metric_logged(self) -> bool:
        rows, self._metrics_offset = read_new(self.dir / "metrics.jsonl", self._metrics_offset)
        return any(not str(r.get("name", "")).startswith(SYSTEM_PREFIX) for r in rows)

    def stalled_s(self) -> float:
        """Seconds since the last progress seen (looking now)."""
        signature = self._files()
        if self._metric_logged() or signature != self._signature:
            self._signature = signature
            self.last = time.monotonic()
        return time.monotonic() - self.last

    def hung(self) -> bool:
        return self.timeout_s > 0 and self.stalled_s() >= self.timeout_s


@dataclass
class RankStack:
    rank: int
    host: str
    text: str = ""
    error: Optional[str] = None
    # (function, file, line), innermost first, of the main thread of the rank's innermost Python process
    frames: List[Tuple[str, str, int]] = field(default_factory=list)


def py_spy() -> Optional[str]:
    given = os.environ.get(PY_SPY_ENV)
    if given is not None:
        return given if os.access(given, os.X_OK) else None
    return shutil.which("py-spy", path=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))


def _python_processes(pid: int) -> List[int]:
    """The rank's process and everything under it that runs Python (a `command` job's shell runs it as a child)."""
    import psutil  # startup

    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for p in procs:
        try:
            if "python" in os.path.basename(p.exe() or p.name()).lower():
                out.append(p.pid)
        except psutil.Error:
            continue
    return out


_FRAME = re.compile(r"^\s+(.+?) \((.+):(\d+)\)\s*$")


def _main_thread_frames(dump: str) -> List[Tuple[str, str, int]]:
    frames: List[Tuple[str, str, int]] = []
    in_main = False
    for line in dump.splitlines():
        if line.startswith("Thread "):
            if frames:  # the first thread with frames, the main one when it is named so
                break
            in_main = True
            continue
        m = _FRAME.match(line)
        if in_main and m:
            frames.append((m.group(1), m.group(2), int(m.group(3))))
    return frames


def take_stacks(pids: Mapping[int, int], hosts: Mapping[int, str]) -> Dict[int, RankStack]:
    """Every rank's Python stacks (rank -> its process id), each dump bounded by DUMP_TIMEOUT_S."""
    tool = py_spy()
    out: Dict[int, RankStack] = {}
    for rank, pid in sorted(pids.items()):
        stack = out[rank] = RankStack(rank, hosts.get(rank, "?"))
        if tool is None:
            stack.error = "py-spy is not installed (pip install py-spy)"
            continue
        texts = []
        for p in _python_processes(pid) or [pid]:
            try:
                done = subprocess.run([tool, "dump", "--pid", str(p), "--full-filenames"], capture_output=True,
                                      text=True, timeout=DUMP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                texts.append(f"(py-spy dump of process {p} took over {DUMP_TIMEOUT_S:.0f} s: given up)")
                continue
            except OSError as exc:
                stack.error = f"py-spy could not run: {exc}"
                break
            if done.returncode == 0:
                texts.append(done.stdout)
                frames = _main_thread_frames(done.stdout)
                if frames:
                    stack.frames = frames  # the innermost process's: the program, not its launcher
            else:
                texts.append(f"(py-spy dump of process {p}: {(done.stderr or done.stdout).strip()})")
        stack.text = "\n".join(texts)
        if not stack.frames and stack.error is None:
            stack.error = "no Python stack could be read" + (f": {texts[-1]}" if texts else "")
    return out


def _library_roots() -> Tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths.get("stdlib", ""), paths.get("platstdlib", ""), paths.get("purelib", ""), paths.get("platlib", ""),
             str(Path(__file__).resolve().parents[1])}
    return tuple(r for r in roots if r)


def _is_user(path: str, roots: Tuple[str, ...]) -> bool:
    return not (path.startswith(roots) or "site-packages" in path or "dist-packages" in path or path.startswith("<"))


def _user_frame(frames: List[Tuple[str, str, int]]) -> Optional[Tuple[str, str, int]]:
    roots = _library_roots()
    return next((f for f in frames if _is_user(f[1], roots)), None)


def _waits(frames: List[Tuple[str, str, int]]) -> bool:
    """Whether a rank sits in a collective or a wait: it waits for the others, it is not the one they wait for."""
    if not frames:
        return False
    func, path = frames[0][0], frames[0][1]
    return "torch/distributed" in path or "horovod" in path or "mpi4py" in path \
        or re.search(r"(wait|barrier|all_?reduce|all_?gather|broadcast|recv|join)", func, re.I) is not None


def _ranks(ranks: List[int]) -> str:
    parts, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(str(start) if start == r else f"{start}-{r}")
            start = None
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(parts)


def _where(frame: Optional[Tuple[str, str, int]]) -> str:
    return f"{os.path.basename(frame[1])}:{frame[2]} in {frame[0]}" if frame else "no frame of its own"


def summary(stacks: Mapping[int, RankStack]) -> str:
    """One line: the ranks not where the others were, with their innermost user frame, then the others."""
    broken = [s for s in stacks.values() if s.error]
    if broken and len(broken) == len(stacks):
        return f"the stacks could not be taken ({broken[0].error})"
    waiting = sorted(r for r, s in stacks.items() if _waits(s.frames))
    culprits = sorted(r for r, s in stacks.items() if not s.error and r not in waiting)
    if not culprits:  # every rank waits: a deadlock in the collectives themselves, named by where each waits
        groups: Dict[str, List[int]] = {}
        for r in waiting:
            s = stacks[r]
            groups.setdefault(f"{s.frames[0][0]} ({_where(_user_frame(s.frames))})", []).append(r)
        return "; ".join(f"{_ranks(rs)} wait in {where}" for where, rs in groups.items())
    parts = [f"{_ranks([r])} on {stacks[r].host}: {_where(_user_frame(stacks[r].frames))}" for r in culprits]
    if waiting:
        first = stacks[waiting[0]]
        parts.append(f"{_ranks(waiting)} wait{'s' if len(waiting) == 1 else ''} in {first.frames[0][0]} "
                     f"({_where(_user_frame(first.frames))})")
    parts += [f"{_ranks([s.rank])}: {s.error}" for s in broken]
    return "; ".join(parts)


def write_stacks(stacks: Mapping[int, RankStack], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for rank, s in sorted(stacks.items()):
            f.write(f"=== rank {rank} on {s.host}" + (f" ({s.error})" if s.error else "") + " ===\n")
            f.write(s.text.rstrip() + "\n\n")


def hang_env(process_group: Optional[str], run_dir: str) -> Dict[str, str]:
    """PyTorch's NCCL flight recorder, on for NCCL process groups (a ring buffer: no cost until it is dumped,
    which PyTorch's own watchdog does when a collective times out), dumping into the run's logs."""
    if process_group != "nccl":
        return {}
    return {"TORCH_NCCL_TRACE_BUFFER_SIZE": "2000", "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": os.path.join(run_dir, "logs", "nccl_trace_rank_")}


class RankWatch:
    """Hang detection for a rank started by its own wrapper on a cluster node (a Slurm task), where no single
    process sees every rank: each rank's wrapper watches the run's progress (its folder is shared), and when
    the run is hung takes its own rank's stack into ranks/stack_<attempt>_<rank>.json; rank 0's then waits for
    the others' (bounded), writes logs/stacks.txt and the one-line summary, and stops its program, so the
    job ends Failed with that line (the other ranks are stopped with the job)."""

    def __init__(self, run_dir: Path, timeout_s: float, rank: int, world: int, host: str, attempt: int,
                 pid: Callable[[], Optional[int]], stop_program: Callable[[], None],
                 requeue: Optional[Callable[[], bool]] = None) -> None:
        """`requeue`: asked of rank 0 instead of stopping its program when the run is to run again (run.hang_action
        =requeue); True once the cluster has taken the job back."""
        self.run_dir, self.timeout_s, self.rank, self.world, self.host = run_dir, timeout_s, rank, world, host
        self.attempt, self.pid, self.stop_program, self.requeue = attempt, pid, stop_program, requeue
        self.message: Optional[str] = None
        self.requeued = False
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> RankWatch:
        if self.timeout_s > 0:
            self._thread = threading.Thread(target=self._loop, name="mltrain-hang-watch", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _path(self, rank: int) -> Path:
        return self.run_dir / "ranks" / f"stack_{self.attempt}_{rank}.json"

    def _loop(self) -> None:
        progress = Progress(self.run_dir, self.timeout_s)
        while not self._stop.wait(1.0):
            if progress.hung():
                break
        else:
            return
        pid = self.pid()
        mine = take_stacks({self.rank: pid} if pid else {}, {self.rank: self.host}).get(self.rank) \
            or RankStack(self.rank, self.host, error="its program had ended")
        atomic_write(self._path(self.rank), json.dumps(dataclasses.asdict(mine)))
        if self.rank != 0:
            return
        deadline = time.monotonic() + DUMP_TIMEOUT_S + 10
        while time.monotonic() < deadline and not all(self._path(r).is_file() for r in range(self.world)):
            time.sleep(0.2)
        stacks: Dict[int, RankStack] = {}
        for r in range(self.world):
            try:
                data = json.loads(self._path(r).read_text())
                stacks[r] = RankStack(r, data["host"], data.get("text", ""), data.get("error"),
                                      [tuple(f) for f in data.get("frames", [])])  # type: ignore[misc]
            except (OSError, ValueError, KeyError):
                stacks[r] = RankStack(r, "?", error="its stack did not arrive (its node or wrapper is gone)")
        path = self.run_dir / "logs" / STACKS_FILE
        write_stacks(stacks, path)
        self.message = f"hung: no progress for {self.timeout_s / 60:g} min; {summary(stacks)}; stacks in {path}"
        if self.requeue is not None:
            with open(self.run_dir / "logs" / f"rank_{self.rank}.log", "ab") as log:
                log.write(f"--- {self.message}; requeued to run again from its checkpoints ---\n".encode())
            self.requeued = self.requeue()
            if self.requeued:
                return
        self.stop_program()
