"""Which port an endpoint listens on, and the one line when it cannot.

An endpoint keeps its port for life: `endpoints restart` (after a reboot, or its server killed) listens on the
recorded one again. A port the OS hands out (bind to port 0) comes from the kernel's ephemeral range, where any
outgoing connection of any program may be holding it by then, and the endpoint would not come back. So an
endpoint created without `--port` is given one outside that range, which only a program that asks for it by
number can take, and above the ports Slurm jobs' rendezvous takes by number (20000-29999, derived from the job
id: backends/slurm/rank.py), so a job started on this machine while the endpoint is down cannot take it either.
A deployment's own port (behind the endpoint's) is new at each start, so the OS picks it.
"""
from __future__ import annotations

import random
import socket
from pathlib import Path
from typing import List, Tuple

from mltrain.endpoints import endpoint_record as records
from mltrain.endpoints.endpoint_record import EndpointError

#: Where endpoints' own ports are drawn, outside the kernel's ephemeral range: 30000 and up holds no
#: well-known service's default (5000, 8000, 8080, 8888, 9000 ...) and no Slurm job's rendezvous port.
LOWEST, HIGHEST = 30000, 65535
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def ephemeral_range() -> Tuple[int, int]:
    """The kernel's range for ports it hands out (Linux's default where it cannot be read)."""
    try:
        low, high = _RANGE_FILE.read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def os_port(host: str) -> int:
    """A port free now, chosen by the OS: for a server started at once."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _free(host: str, port: int) -> bool:
    with socket.socket(_family(host), socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def drawn_ranges() -> List[range]:
    """The ports a new endpoint is drawn from: LOWEST up to the ephemeral range, and above it (with Linux's
    default range, 30000-32767 and 61000-65535)."""
    low, high = ephemeral_range()
    below, above = range(LOWEST, min(low, HIGHEST + 1)), range(max(high + 1, LOWEST), HIGHEST + 1)
    return [r for r in (below, above) if len(r)]


def pick(ranges: List[range]) -> int:
    """One port at random, every port of `ranges` as likely."""
    index = random.randrange(sum(len(r) for r in ranges))
    for r in ranges:
        if index < len(r):
            return r[index]
        index -= len(r)
    raise AssertionError("unreachable: index is below the ranges' total")


def draw(host: str, attempts: int = 200) -> int:
    """A port for a new endpoint: free now, no other endpoint's, outside the ephemeral range."""
    taken = {records.load_endpoint(name).port for name in records.list_names()}
    ranges = drawn_ranges()
    for _ in range(attempts if ranges else 0):
        port = pick(ranges)
        if port not in taken and _free(host, port):
            return port
    low, high = ephemeral_range()
    raise EndpointError(f"no free port on {host} from {LOWEST} to {HIGHEST} outside the system's ephemeral range "
                        f"({low}-{high}); give the endpoint one with --port")


def check(host: str, port: int, endpoint: str) -> None:
    """A port another program holds fails here, in one line, before any server starts. (Our own endpoint's
    servers hold it with SO_REUSEPORT, so binding with the same flag tells the two apart.)"""
    for other in records.list_names():
        if other != endpoint and records.load_endpoint(other).port == port:
            raise EndpointError(f"port {port} is endpoint {other}'s; give endpoint {endpoint} another port")
    with socket.socket(_family(host), socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise EndpointError(f"port {port} on {host} is in use by another program ({exc.strerror}); give "
                                f"endpoint {endpoint} another port, or stop that program") from None
