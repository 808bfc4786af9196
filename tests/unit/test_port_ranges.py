"""Which ports mltrain takes by number: Slurm jobs' rendezvous, and endpoints'. The two never overlap, and
neither is in the range the kernel hands out to outgoing connections (where any program's connection could be
holding the port when the job, or a restarted endpoint, binds it)."""
import collections
import socket
from pathlib import Path

from mltrain.backends.slurm.rank import PORT_BASE, PORT_SPAN, derived_port, rendezvous
from mltrain.endpoints import endpoint_port


def _ephemeral():
    return tuple(map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()))


def test_slurm_rendezvous_ports_are_below_the_ephemeral_range_and_the_endpoints_ports():
    low, _ = _ephemeral()
    ports = {derived_port(str(job_id)) for job_id in range(1, 200_000, 7)}
    assert min(ports) >= 20000 and max(ports) < min(low, endpoint_port.LOWEST), (min(ports), max(ports))
    assert derived_port("123_4") == derived_port("1234")  # an array task's id: its digits


def test_endpoint_ports_are_drawn_outside_the_ephemeral_range_and_the_slurm_ports():
    low, high = _ephemeral()
    ranges = endpoint_port.drawn_ranges()
    assert ranges, "no port left to draw from"
    for r in ranges:
        assert r.start >= PORT_BASE + PORT_SPAN and r.stop - 1 <= 65535
        assert r.stop <= low or r.start > high, (r, low, high)


def test_a_drawn_port_is_as_likely_from_either_range():
    counts = collections.Counter(endpoint_port.pick([range(10, 12), range(50, 52)]) for _ in range(4000))
    assert set(counts) == {10, 11, 50, 51}
    assert all(800 < n < 1200 for n in counts.values()), counts  # 1000 each; outside is p < 1e-10


def test_a_taken_rendezvous_port_at_the_top_moves_to_the_bottom_not_into_the_endpoints_ports(tmp_path):
    job_id = str(PORT_SPAN - 1)  # derives the span's last port
    top = derived_port(job_id)
    assert top == PORT_BASE + PORT_SPAN - 1
    (tmp_path / "ranks").mkdir()
    with socket.socket() as taken:
        taken.bind(("", top))
        taken.listen()
        port = rendezvous(tmp_path, job_id, attempt=0, rank=0, master="127.0.0.1")
    assert PORT_BASE <= port < top  # wrapped to the bottom of the span (20000, or the next free after it)
