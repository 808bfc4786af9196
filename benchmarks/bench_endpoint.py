"""Serving a trivial scoring script: through an mltrain endpoint against the same script under Azure's inference
server started by hand (`azmlinfsrv --entry_script score.py --port P`, what a user runs without mltrain).

Both are the same server (azureml-inference-server-http, from mltrain's layer of it) with one worker; mltrain's
adds its endpoint app in the same process (the key check, the traffic rule). Both log to a file. The client sends requests one after
another, each on a new connection (gunicorn's sync workers close every connection, on both sides), with the key
on mltrain's side. Rounds alternate between the two; prints each side's median p50/p99 latency and requests/s,
and the ratios. Also: an endpoint of two deployments at 50/50 (half its requests are passed on from the one the
kernel handed the connection to), and the start-up time of each (command start to the first answer).

Usage: .venv/bin/python benchmarks/bench_endpoint.py [--requests 1000] [--rounds 5]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

MLTRAIN = str(Path(sys.executable).with_name("mltrain"))
SCORE = "import json\ndef init():\n    pass\ndef run(raw_data):\n    return json.loads(raw_data)['data']\n"
BODY = b'{"data": [1, 2, 3]}'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_answer(port: int, headers: Dict[str, str], limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            if one(port, headers)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.02)
    raise SystemExit(f"nothing answered on port {port}")


def one(port: int, headers: Dict[str, str]) -> Tuple[int, float]:
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/score", BODY, {"Content-Type": "application/json", **headers})
    r = c.getresponse()
    r.read()
    c.close()
    return r.status, time.perf_counter() - t


def measure(port: int, headers: Dict[str, str], n: int) -> Dict[str, float]:
    times = []
    for _ in range(n):
        status, dt = one(port, headers)
        assert status == 200, status
        times.append(dt)
    times.sort()
    return {"p50": times[n // 2] * 1e3, "p99": times[int(n * 0.99)] * 1e3, "rps": n / sum(times)}


def mltrain(env: Dict[str, str], cwd: Path, *args: str) -> str:
    out = subprocess.run([MLTRAIN, *args], env=env, cwd=cwd, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    return out.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-endpoint-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home"), "MLTRAIN_TRACKING": "off", "AZUREML_LOG_LEVEL": "INFO"}
    (work / "code").mkdir()
    (work / "code" / "score.py").write_text(SCORE)
    procs: List[subprocess.Popen] = []
    try:
        layer = subprocess.run([sys.executable, "-c", "from mltrain.endpoints import inference_server as s; "
                                "print(s.ensure_layer(lambda m: None))"], env=env, capture_output=True, text=True,
                               check=True).stdout.strip()
        # Azure's server by hand, its log to a file as mltrain's deployments keep theirs (it logs each request)
        port = free_port()
        by_hand_log = open(work / "by-hand.log", "wb")
        t = time.perf_counter()
        procs.append(subprocess.Popen([sys.executable, "-m", "azureml_inference_server_http.amlserver",
                                       "--entry_script", "score.py", "--port", str(port)], cwd=work / "code",
                                      env={**env, "PYTHONPATH": layer}, stdout=by_hand_log,
                                      stderr=subprocess.STDOUT, start_new_session=True))
        wait_answer(port, {})
        start_by_hand = time.perf_counter() - t
        # mltrain's endpoint: one deployment, with its key
        t = time.perf_counter()
        mltrain(env, work, "endpoints", "create", "bench")
        mltrain(env, work, "endpoints", "deploy", "bench", "--name", "blue", "--code", "code", "--scoring-script",
                "score.py")
        shown = json.loads(mltrain(env, work, "endpoints", "show", "bench", "--json"))
        key = json.loads(mltrain(env, work, "endpoints", "keys", "bench"))["primaryKey"]
        ours = int(shown["scoring_uri"].rsplit(":", 1)[1].split("/")[0])
        auth = {"Authorization": f"Bearer {key}"}
        wait_answer(ours, auth)
        start_mltrain = time.perf_counter() - t
        # a second endpoint, split 50/50 between two deployments
        mltrain(env, work, "endpoints", "create", "split")
        for name in ("blue", "green"):
            mltrain(env, work, "endpoints", "deploy", "split", "--name", name, "--code", "code", "--scoring-script",
                    "score.py")
        mltrain(env, work, "endpoints", "traffic", "split", "blue=50", "green=50")
        split = int(json.loads(mltrain(env, work, "endpoints", "show", "split", "--json"))["scoring_uri"]
                    .rsplit(":", 1)[1].split("/")[0])
        split_key = {"Authorization": "Bearer " + json.loads(mltrain(env, work, "endpoints", "keys", "split"))["primaryKey"]}
        mltrain(env, work, "endpoints", "create", "open", "--auth-mode", "none")
        mltrain(env, work, "endpoints", "deploy", "open", "--name", "blue", "--code", "code", "--scoring-script",
                "score.py")
        open_port = int(json.loads(mltrain(env, work, "endpoints", "show", "open", "--json"))["scoring_uri"]
                        .rsplit(":", 1)[1].split("/")[0])
        # The same request as the keyed endpoint's (Azure's server ignores the header): the header alone costs
        # time on the wire and in the parsing (about 50 us here), which is the request's, not mltrain's.
        arms = {"azmlinfsrv by hand": (port, {}), "by hand, same request": (port, auth),
                "mltrain, no key": (open_port, {}), "mltrain, key": (ours, auth), "mltrain 50/50 split": (split, split_key)}
        for p, h in arms.values():
            measure(p, h, 100)  # warm-up
        results: Dict[str, List[Dict[str, float]]] = {k: [] for k in arms}
        for r in range(args.rounds):
            order = list(arms) if r % 2 == 0 else list(reversed(list(arms)))
            for name in order:
                results[name].append(measure(*arms[name], args.requests))
        print(f"{args.requests} sequential requests x {args.rounds} rounds, alternating; medians of the rounds; "
              "ratios against Azure's server given the same request")
        print(f"{'':<22} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} {'p50 ratio':>10} {'p99 ratio':>10}")
        for name, rows in results.items():
            base = results["azmlinfsrv by hand" if name in ("azmlinfsrv by hand", "mltrain, no key")
                           else "by hand, same request"]
            p50 = statistics.median(r["p50"] for r in rows)
            p99 = statistics.median(r["p99"] for r in rows)
            rps = statistics.median(r["rps"] for r in rows)
            r50 = statistics.median(a["p50"] / b["p50"] for a, b in zip(rows, base))
            r99 = statistics.median(a["p99"] / b["p99"] for a, b in zip(rows, base))
            print(f"{name:<22} {p50:>8.3f} {p99:>8.3f} {rps:>8.0f} {r50:>10.3f} {r99:>10.3f}")
        print(f"start-up to the first answer: azmlinfsrv by hand {start_by_hand:.2f} s; mltrain endpoints create + "
              f"deploy {start_mltrain:.2f} s")
    finally:
        for name in ("bench", "split", "open"):
            subprocess.run([MLTRAIN, "endpoints", "delete", name], env=env, capture_output=True)
        for proc in procs:
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
