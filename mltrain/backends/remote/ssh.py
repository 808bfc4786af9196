"""The connection to a remote cluster: the system `ssh`, so the user's `~/.ssh/config` gives the port, the key,
a jump host and ControlMaster (one connection reused: each call then costs a few milliseconds). Never a prompt
(BatchMode): a password or a host key to accept would hang a submission that nobody watches, so an unknown host
key is refused, never accepted silently. `MLTRAIN_SSH_CONFIG` names another config file (`ssh -F`).

What ssh says when it cannot connect becomes one line naming the login and what to do.
"""
from __future__ import annotations

import os
import shlex
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import IO, List, Optional, Sequence, Union

from mltrain.base.errors import MltrainError

#: Seconds to wait for the connection itself (a run's own commands may take longer).
CONNECT_TIMEOUT_S = 15


class RemoteError(MltrainError):
    """A remote cluster refused or could not be reached: the one line says which and why."""


def ssh_argv(login: str) -> List[str]:
    config = os.environ.get("MLTRAIN_SSH_CONFIG")
    return ["ssh", *(["-F", config] if config else []), "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", "-o", "ServerAliveInterval=15", login]


@lru_cache(maxsize=1)
def far_side_source() -> str:
    return (Path(__file__).parent / "far_side.py").read_text(encoding="utf-8")


def _why(login: str, stderr: str) -> str:
    text = stderr.strip()
    low = text.lower()
    if "could not resolve hostname" in low or "name or service not known" in low:
        return f"unknown host: {login} (ssh could not resolve it; check compute.login and your ~/.ssh/config)"
    if "host key verification failed" in low or "no " in low and "host key is known" in low:
        return (f"the host key of {login} is not trusted (it is not in your known_hosts; connect once with "
                f"`ssh {login}` and check its fingerprint: mltrain never accepts one silently)")
    if "remote host identification has changed" in low:
        return f"the host key of {login} has changed since it was trusted: ssh refuses it (see `ssh {login}`)"
    if "permission denied" in low:
        return f"{login} refused the authentication (no key it accepts; `ssh {login}` must log in without a password)"
    if "connection refused" in low or "timed out" in low or "no route to host" in low:
        return f"cannot reach {login}: {text.splitlines()[-1]}"
    last = text.splitlines()[-1] if text else "ssh exited with 255"
    return f"cannot connect to {login}: {last}"


def run(login: str, remote: Sequence[str], stdin: Union[bytes, IO[bytes], None] = None,
        timeout: Optional[float] = None, stdout: Optional[IO[bytes]] = None) -> bytes:
    """Run `remote` (an argv, quoted for the remote shell) on the login node; its stdout (unless given `stdout`).
    Raises RemoteError: the connection's failure, or the command's own last line on stderr."""
    argv = ssh_argv(login) + [" ".join(shlex.quote(a) for a in remote)]
    data: Optional[bytes] = None
    source: Union[IO[bytes], int, None] = subprocess.DEVNULL
    if isinstance(stdin, bytes):
        data, source = stdin, None
    elif stdin is not None:
        source = stdin
    try:
        done = subprocess.run(argv, input=data, stdin=source,
                              stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except FileNotFoundError:
        raise RemoteError("ssh is not installed here: a remote compute (compute.login) needs the system's ssh "
                          "client (Debian: apt install openssh-client)") from None
    except subprocess.TimeoutExpired:
        raise RemoteError(f"{login} did not answer within {timeout:.0f}s") from None
    err = done.stderr.decode("utf-8", "replace")
    if done.returncode == 255:
        raise RemoteError(_why(login, err))
    if done.returncode:
        lines = [line for line in err.strip().splitlines() if line.strip()]
        raise RemoteError(f"on {login}: {lines[-1] if lines else f'exited with {done.returncode}'}")
    return done.stdout or b""


def far_side(login: str, python: str, *args: str, stdin: Union[bytes, IO[bytes], None] = None,
             timeout: Optional[float] = None, stdout: Optional[IO[bytes]] = None) -> bytes:
    """One command of the cluster's side (mltrain.backends.remote.far_side), run by `python` there."""
    # -S: the standard library is all it needs, and the site packages' .pth files cost a start-up each call
    return run(login, [python, "-S", "-c", far_side_source(), *args], stdin=stdin, timeout=timeout, stdout=stdout)
