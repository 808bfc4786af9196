"""How an endpoint's port is shared among its deployments: listening sockets in proportion to the traffic rule.

Each worker of each deployment opens its own listening sockets on the endpoint's port (SO_REUSEPORT;
endpoint_worker.py), as many as the deployment's share calls for. Linux hands a new connection to one socket
of the port's group, chosen by a keyed hash of the connection's addresses and ports, so each socket takes an
equal part of the connections: over 1,000 new connections from one client (20 trials each, 2 to 100 sockets)
a share's standard deviation was 0.7-1.1 points, no wider than a fair random draw's (1.0-1.6), and no trial
strayed more than 2.5 points. The deployment whose socket took a connection is thus the one the rule picks,
and the request is answered where it arrived: no pass-on to another deployment.

The sockets are the workers' own, not their master's, so a worker can add and close them while it runs: a
traffic change is re-balanced without restarting anything (no init() again). A closing socket's waiting
connections are accepted first (drained); one that lands in the microseconds between the last look and the
close is reset by Linux, unless the machine sets net.ipv4.tcp_migrate_req=1 (Linux 5.14+), which moves it to
another socket of the group (measured, three clients sending without pause: 1 reset in 200 re-balances, 15,000
requests; none with the setting). `nudge` wakes the workers at once; `wait_balanced` is how the command that
changed the rule knows its split is in force (the sockets counted as the kernel has them).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import time
from math import gcd, lcm
from pathlib import Path
from typing import Dict, List, Optional, Set

from mltrain.endpoints.endpoint_record import DEPLOYMENT_FILE, ENDPOINT_FILE

#: The most sockets an endpoint's deployments open on its port together. Any split in whole percents between
#: deployments of one worker each needs at most 100 (90/10: 9 and 1; 33/67: 33 and 67); with several workers
#: the shares are rounded to this many sockets (each share then within half a socket: 0.5 points).
MAX_SOCKETS = 100


def per_worker(traffic: Dict[str, int], workers: Dict[str, int]) -> Dict[str, int]:
    """Sockets each worker of each deployment (name -> its worker count) opens on the endpoint's port, so that a
    deployment's workers together hold sockets in proportion to its share, in the fewest sockets. With no share
    anywhere (a new endpoint, or every share 0) each worker opens one: the port still answers, with 424 or with
    the deployment a request names."""
    shares = {n: s for n, s in traffic.items() if s > 0 and workers.get(n, 0) > 0}
    if not shares:
        return {n: 1 for n in workers}
    scale = lcm(*(workers[n] for n in shares))  # share / workers, made whole (not fractions: its import is 10 ms)
    whole = {n: s * scale // workers[n] for n, s in shares.items()}
    common = gcd(*whole.values())
    counts = {n: v // common for n, v in whole.items()}
    if sum(counts[n] * workers[n] for n in counts) > MAX_SOCKETS:
        total = sum(shares.values())
        counts = {n: max(1, round(s * MAX_SOCKETS / total / workers[n])) for n, s in shares.items()}
    return {n: counts.get(n, 0) for n in workers}


def plan(endpoint_dir: Path) -> Dict[str, int]:
    """per_worker for an endpoint's folder as its records stand: the rule, and each deployment's worker count."""
    traffic = {str(k): int(v) for k, v in (json.loads((endpoint_dir / ENDPOINT_FILE).read_text()).get("traffic")
                                           or {}).items()}
    workers: Dict[str, int] = {}
    for folder in sorted((endpoint_dir / "deployments").glob("*")):
        try:
            workers[folder.name] = int(json.loads((folder / DEPLOYMENT_FILE).read_text()).get("instance_count") or 1)
        except (OSError, ValueError):
            continue  # a deployment being made or deleted: none of its workers reads this
    return per_worker(traffic, workers)


# --------------------------------------------------------------------- the sockets as the kernel has them
def listening_inodes(port: int) -> Set[int]:
    """Inodes of the TCP sockets listening on `port`, on any address: asked of the kernel's sock_diag (it sends the
    listening sockets alone), else read from /proc/net/tcp, which lists every connection of the machine (13,000
    lines, 60 ms, after a benchmark's TIME_WAITs)."""
    try:
        return {inode for family in (socket.AF_INET, socket.AF_INET6) for inode in _diag_listening(family, port)}
    except OSError:
        pass
    found: Set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(int(fields[9]))
    return found


_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY, _NLMSG_DONE, _NLMSG_ERROR = 4, 20, 3, 2
_TCP_LISTEN = 10


def _diag_listening(family: int, port: int) -> List[int]:
    """One sock_diag dump of `family`'s TCP sockets in state LISTEN (linux/inet_diag.h): their inodes on `port`."""
    request = struct.pack("=BBBBI48x", family, socket.IPPROTO_TCP, 0, 0, 1 << _TCP_LISTEN)  # inet_diag_req_v2
    header = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, 0x301, 1, 0)  # REQUEST | DUMP
    found: List[int] = []
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
        nl.sendall(header + request)
        while True:
            data = nl.recv(65536)
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if kind == _NLMSG_DONE:
                    return found
                if kind == _NLMSG_ERROR or length < 16:
                    raise OSError("sock_diag refused the request")
                # inet_diag_msg: family, state, timer, retrans, then the socket id (source port first, big-endian)
                sport = struct.unpack_from(">H", data, offset + 16 + 4)[0]
                inode = struct.unpack_from("=I", data, offset + 16 + 68)[0]
                if sport == port:
                    found.append(inode)
                offset += (length + 3) & ~3


def socket_inodes(pid: int) -> Set[int]:
    """Inodes of the sockets process `pid` holds open."""
    found: Set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(int(target[8:-1]))
    return found


def workers_of(pid: int) -> List[int]:
    """A gunicorn master's worker processes (its children)."""
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def census(port: int, masters: Dict[str, int]) -> Dict[str, List[int]]:
    """deployment -> the number of sockets each of its workers listens with on `port`."""
    group = listening_inodes(port)
    return {name: [len(socket_inodes(w) & group) for w in workers_of(pid)] for name, pid in masters.items()}


def nudge(masters: Dict[str, int]) -> None:
    """Wake every worker to re-read the rule now (SIGWINCH: gunicorn's master and workers take it as a no-op,
    and its handler wakes a worker's wait), rather than at its next look (endpoint_worker.LOOK_S)."""
    for pid in masters.values():
        try:
            os.killpg(pid, signal.SIGWINCH)
        except (ProcessLookupError, PermissionError):
            pass


def wait_balanced(endpoint_dir: Path, port: int, masters: Dict[str, int], timeout_s: float = 3.0) -> Optional[str]:
    """None once every worker of `masters` listens with its share of sockets; else what is still off. A worker in
    the middle of a request re-balances after it: a long request makes this give up, not fail (until then the
    deployments the rule no longer names pass their requests on, so the split holds)."""
    nudge(masters)
    deadline = time.monotonic() + timeout_s
    while True:
        want = plan(endpoint_dir)
        have = census(port, masters)
        off = {n: counts for n, counts in have.items() if any(c != want.get(n, 0) for c in counts)}
        if not off or time.monotonic() >= deadline:
            return None if not off else ", ".join(f"{n}: {c} sockets, {want.get(n, 0)} wanted" for n, c in off.items())
        time.sleep(0.01)
