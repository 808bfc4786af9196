"""A run's system metrics: what its ranks used of the CPU, memory and GPUs, sampled while they run.

Written into the run's metrics.jsonl under MLflow's own system-metric names (`system/cpu_utilization_percentage`,
`system/gpu_0_utilization_percentage`, ...: mlflow.system_metrics), so `mltrain runs show`, `runs plot` and MLflow's
UI (through the mirror) chart them as Azure ML's run page charts a run's GPUs. Besides MLflow's machine-wide
figures, each rank's own process tree: `system/process_cpu_utilization_percentage` (100 = one core) and
`system/process_memory_usage_megabytes` (resident), logged as that rank's.

The sampler is a thread of the process that started the rank (the local driver, the mpirun or Slurm rank's
wrapper), so it works for any program, a `command` job's shell included, and costs the rank nothing. psutil
reads /proc; NVML (nvidia-ml-py) is asked only where the rank was given GPUs and the driver answers.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from mltrain.runs.metrics import SYSTEM_PREFIX as PREFIX
from mltrain.runs.metrics import MetricsWriter

#: The first sample comes this soon (or at the interval, if shorter): a short run still gets one.
FIRST_SAMPLE_S = 1.0


def _tree(pid: int) -> Optional[Tuple[float, float]]:
    """(CPU seconds, resident MB) of a process and everything under it, in one walk of the tree (CPU seconds of
    children it has waited for included); None once it has ended."""
    import psutil  # startup

    try:
        root = psutil.Process(pid)
        with root.oneshot():
            t = root.cpu_times()
            cpu, rss = t.user + t.system + t.children_user + t.children_system, root.memory_info().rss
        for child in root.children(recursive=True):
            try:
                with child.oneshot():
                    c = child.cpu_times()
                    cpu, rss = cpu + c.user + c.system, rss + child.memory_info().rss
            except psutil.Error:
                continue
        return cpu, rss / 1e6
    except psutil.Error:
        return None


class _Nvml:
    """The GPUs named by CUDA_VISIBLE_DEVICES entries, through NVML; nothing where there is no driver."""

    def __init__(self, devices: Sequence[str]) -> None:
        self.handles: Dict[str, Any] = {}
        self.nvml: Any = None
        if not devices:
            return
        try:
            # nvidia-ml-py: asked only for a rank that was given GPUs
            import pynvml  # type: ignore[import-untyped]  # startup

            pynvml.nvmlInit()
        except Exception:  # no driver, or no library: the run has no GPU figures, and nothing else changes
            return
        self.nvml = pynvml
        for d in devices:
            try:
                self.handles[d] = (pynvml.nvmlDeviceGetHandleByIndex(int(d)) if d.isdigit()
                                   else pynvml.nvmlDeviceGetHandleByUUID(d))
            except Exception:  # a stand-in or a MIG name NVML does not know: left out
                continue

    def sample(self) -> Dict[str, float]:
        out: Dict[str, float] = {}
        n = self.nvml
        for d, h in self.handles.items():
            key = f"{PREFIX}gpu_{d}_"
            try:
                util = n.nvmlDeviceGetUtilizationRates(h)
                mem = n.nvmlDeviceGetMemoryInfo(h)
                out[key + "utilization_percentage"] = float(util.gpu)
                out[key + "memory_usage_megabytes"] = mem.used / 1e6
                out[key + "memory_usage_percentage"] = 100.0 * mem.used / mem.total if mem.total else 0.0
                out[key + "power_usage_watts"] = n.nvmlDeviceGetPowerUsage(h) / 1000.0
            except Exception:  # a device that stops answering (reset, lost): its figures stop
                continue
        return out

    def close(self) -> None:
        if self.nvml is not None:
            try:
                self.nvml.nvmlShutdown()
            except Exception:
                pass


class SystemSampler:
    """Samples ranks' process trees (`pids()`: rank -> pid, asked at each sample), the machine, and the GPUs
    in `devices` (rank -> CUDA_VISIBLE_DEVICES entries) every `interval_s`, into `metrics_path`.
    `machine_rank`: the rank whose name the machine-wide and GPU figures go under (None: not this sampler's)."""

    def __init__(self, metrics_path: Path | str, interval_s: float, pids: Callable[[], Mapping[int, int]],
                 devices: Optional[Mapping[int, Sequence[str]]] = None, machine_rank: Optional[int] = 0) -> None:
        self.path, self.interval_s, self.pids = Path(metrics_path), float(interval_s), pids
        self.devices = {r: list(d) for r, d in (devices or {}).items()}
        self.machine_rank = machine_rank
        self.samples = 0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._last: Dict[int, tuple[float, float]] = {}  # rank -> (wall, cpu seconds) of its previous sample

    def start(self) -> SystemSampler:
        if self.interval_s <= 0:
            return self
        self._thread = threading.Thread(target=self._loop, name="mltrain-system-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling; a run shorter than the first sample still gets one of the machine, taken now."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            if self.samples == 0:
                self._safe_sample(_Nvml([]))

    def _loop(self) -> None:
        import psutil  # startup

        gpus = _Nvml(sorted({d for ds in self.devices.values() for d in ds}))
        try:
            psutil.cpu_percent(None)  # the machine's CPU figure is measured from this call to the next
            self._prime()
            wait = min(FIRST_SAMPLE_S, self.interval_s)
            while not self._stop.wait(wait):
                self._safe_sample(gpus)
                wait = self.interval_s
        finally:
            gpus.close()

    def _prime(self) -> None:
        now = time.monotonic()
        for rank, pid in self.pids().items():
            tree = _tree(pid)
            if tree is not None:
                self._last[rank] = (now, tree[0])

    def _safe_sample(self, gpus: _Nvml) -> None:
        """A sample that cannot fail the run: a full disk or a vanished run folder costs the figures, not the run
        (the rank's own output and the run's end are what must be written)."""
        try:
            self.sample(gpus)
        except OSError:
            self.samples += 1

    def sample(self, gpus: _Nvml) -> None:
        import psutil  # startup

        step, now = self.samples, time.monotonic()
        for rank, pid in self.pids().items():
            tree = _tree(pid)
            if tree is None:  # ended since pids() was asked
                continue
            cpu, rss = tree
            values = {f"{PREFIX}process_memory_usage_megabytes": rss}
            before = self._last.get(rank)
            if before is not None and now > before[0]:
                values[f"{PREFIX}process_cpu_utilization_percentage"] = 100.0 * max(0.0, cpu - before[1]) / (now - before[0])
            self._last[rank] = (now, cpu)
            MetricsWriter(self.path, rank=rank).log_many(values, step=step)
        if self.machine_rank is not None:
            memory = psutil.virtual_memory()
            machine: Dict[str, float] = {
                f"{PREFIX}cpu_utilization_percentage": psutil.cpu_percent(None),
                f"{PREFIX}system_memory_usage_megabytes": memory.used / 1e6,
                f"{PREFIX}system_memory_usage_percentage": memory.used / memory.total * 100 if memory.total else 0.0,
            }
            machine.update(gpus.sample())
            MetricsWriter(self.path, rank=self.machine_rank).log_many(machine, step=step)
        self.samples += 1


def one_rank(metrics_path: Path | str, interval_s: float, rank: int, local_rank: int,
             alive: Callable[[], Optional[int]]) -> SystemSampler:
    """The sampler of a rank started by its own wrapper (mpirun's, a Slurm task's): `alive()` is the program's
    pid while it runs, else None. The node's first rank also samples the machine and the GPUs it sees."""
    mask = os.environ.get("CUDA_VISIBLE_DEVICES")
    devices = [d.strip() for d in mask.split(",") if d.strip()] if mask else []

    def pids() -> Dict[int, int]:
        pid = alive()
        return {} if pid is None else {rank: pid}

    return SystemSampler(metrics_path, interval_s, pids, {rank: devices}, rank if local_rank == 0 else None)
