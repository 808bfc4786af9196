"""This machine's GPUs, and the pool every local run takes its devices from.

The pool is shared by every run mltrain starts on the machine: the members of a sweep, the steps of a
pipeline, two `mltrain` commands in two terminals. A device is held by an exclusive `flock` on a file
of its own under `MLTRAIN_HOME/gpus/<host>/`. Why flock and not a table of holders: the kernel drops
the lock when the last descriptor of it closes, so a run's devices come back however it ends, `kill -9`
of its driver included, and there is never a stale entry to clean. The descriptors go to the run's
guard too (backends/local/guard.py), so a killed driver's devices come back once the guard has stopped
its ranks, not while they still run on them.

Which devices: `CUDA_VISIBLE_DEVICES` when it is set (a list the user or a scheduler declared; on a
machine without the NVIDIA driver its entries are taken as declared, which is how the tests give the
pool four devices), else every GPU the driver reports. Torch is never imported here: the CLI stays light.
"""
from __future__ import annotations

import errno
import fcntl
import os
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from mltrain.base.errors import ConfigError
from mltrain.base.home import mltrain_home
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.local_compute import LocalComputeConf
from mltrain.jobspec.schema import compute_as
from mltrain.ranks.contract import places

#: CUDA_VISIBLE_DEVICES values that hide every device.
HIDDEN = ("", "-1", "none", "NoDevFiles")
#: How often a run waiting for devices looks again.
WAIT_POLL_S = 0.05


def driver_gpus() -> int:
    """GPUs the NVIDIA driver reports on this machine (0 without the driver)."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def machine_devices() -> List[str]:
    """The devices local runs may be given, as CUDA_VISIBLE_DEVICES names them."""
    mask = os.environ.get("CUDA_VISIBLE_DEVICES")
    if mask is None:
        return [str(i) for i in range(driver_gpus())]
    if mask.strip() in HIDDEN:
        return []
    return [d.strip() for d in mask.split(",") if d.strip()]


def visible_gpus() -> int:
    """GPUs a process here can use (the driver's, within CUDA_VISIBLE_DEVICES): what decides nccl or gloo."""
    count = driver_gpus()
    mask = os.environ.get("CUDA_VISIBLE_DEVICES")
    if mask is None or not count:
        return count
    return min(count, len(machine_devices()))


def check_declared(devices: Sequence[str]) -> None:
    """A device list naming an ordinal the driver does not have is refused (one line); without a driver the
    entries are declared stand-ins, and UUIDs (GPU-..., MIG-...) are the driver's business."""
    count = driver_gpus()
    if not count:
        return
    for d in devices:
        if d.isdigit() and int(d) >= count:
            raise ConfigError("CUDA_VISIBLE_DEVICES", f"names device {d}; the NVIDIA driver here reports {count} "
                              f"GPU(s)", [str(i) for i in range(count)])


def _file_name(device: str) -> str:
    return "gpu-" + re.sub(r"[^A-Za-z0-9._-]", "_", device) + ".lock"


@dataclass
class DeviceLease:
    """Devices one run holds until close() (or until every process holding `fds` has ended), and what it asked
    for (None: nothing; asked, with no devices: the wait for them was canceled)."""

    devices: List[str]
    fds: List[int] = field(default_factory=list)
    request: Optional[DeviceRequest] = None

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []

    def __enter__(self) -> DeviceLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class GpuPool:
    """The devices of this machine, each held by at most one run at a time."""

    def __init__(self, devices: Sequence[str], root: Optional[Path] = None) -> None:
        self.devices = list(devices)
        self.dir = (root or mltrain_home() / "gpus") / socket.gethostname()

    @classmethod
    def of_machine(cls) -> GpuPool:
        return cls(machine_devices())

    def _open(self, device: str) -> int:
        self.dir.mkdir(parents=True, exist_ok=True)
        return os.open(self.dir / _file_name(device), os.O_RDWR | os.O_CREAT, 0o644)

    def _lock(self, fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            raise

    def try_take(self, count: int, holder: str) -> Optional[DeviceLease]:
        """`count` free devices, held at once, or None (nothing held) when fewer are free."""
        with self._pool_lock():
            lease = DeviceLease([])
            for device in self.devices:
                if len(lease.devices) == count:
                    break
                fd = self._open(device)
                if self._lock(fd):
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, holder.encode(), 0)
                    lease.devices.append(device)
                    lease.fds.append(fd)
                else:
                    os.close(fd)
            if len(lease.devices) < count:
                lease.close()
                return None
            return lease

    def take(self, count: int, holder: str, cancel: threading.Event,
             on_wait: Callable[[str], None]) -> Optional[DeviceLease]:
        """`count` devices, waiting while others hold them (on_wait is told who, each time that changes);
        None if `cancel` is set first."""
        said = ""
        while not cancel.is_set():
            lease = self.try_take(count, holder)
            if lease is not None:
                return lease
            held = self.holders()
            text = (f"waiting for {count} GPU(s): {len(held)} of {len(self.devices)} held ("
                    + ", ".join(f"{d} by {who}" for d, who in held.items()) + ")")
            if text != said:
                on_wait(text)
                said = text
            time.sleep(WAIT_POLL_S)
        return None

    def holders(self) -> Dict[str, str]:
        """{device: who holds it} for the devices in use now."""
        out: Dict[str, str] = {}
        for device in self.devices:
            fd = self._open(device)
            try:
                if self._lock(fd):
                    fcntl.flock(fd, fcntl.LOCK_UN)
                else:
                    out[device] = os.pread(fd, 256, 0).decode(errors="replace").strip() or "another process"
            finally:
                os.close(fd)
        return out

    def free(self) -> List[str]:
        held = self.holders()
        return [d for d in self.devices if d not in held]

    def _pool_lock(self) -> _Held:
        """Taking several devices is one step: two runs that each want 2 of 2 free never get 1 each."""
        self.dir.mkdir(parents=True, exist_ok=True)
        return _Held(os.open(self.dir / "pool.lock", os.O_RDWR | os.O_CREAT, 0o644))


class _Held:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing drops the lock


def split(devices: Sequence[str], job: FrozenJob, per_rank: Optional[int]) -> List[List[str]]:
    """What each rank (by global rank) sees: its node's share of the run's devices (a node simulated on this
    machine has its own, as a cluster node would), and of those its own `per_rank`, or (torchrun's
    convention: the rank picks cuda:LOCAL_RANK) all of its node's."""
    per_node = len(devices) // job.node_count
    out = []
    for place in places(job):
        node = list(devices[place.node_rank * per_node:(place.node_rank + 1) * per_node])
        out.append(node if per_rank is None else node[place.local_rank * per_rank:(place.local_rank + 1) * per_rank])
    return out


@dataclass(frozen=True)
class DeviceRequest:
    """How many of the pool's devices a run takes, and how many each rank sees (None: all of the run's)."""

    count: int
    per_rank: Optional[int] = None


def device_request(job: FrozenJob) -> Optional[DeviceRequest]:
    """What a local run asks of the pool; None where it takes nothing (no GPU here, or compute.gpus=0).

    compute.gpus unset: one device per rank (each rank uses cuda:LOCAL_RANK, as under torchrun), as many as
    the machine has, so that runs side by side land on different devices instead of all on device 0.
    compute.gpus counts per node: a run of nodes simulated on this machine takes that many for each."""
    compute = compute_as(job.compute, LocalComputeConf)
    ranks, nodes = job.process_count_per_node, job.node_count
    if compute.gpus_per_task is not None:
        return DeviceRequest(compute.gpus_per_task * ranks * nodes, compute.gpus_per_task)
    if compute.gpus is not None:  # per node, as on a cluster: each simulated node gets as many
        return DeviceRequest(compute.gpus * nodes) if compute.gpus > 0 else None
    count = min(ranks, len(machine_devices()) // nodes) * nodes
    return DeviceRequest(count) if count else None
