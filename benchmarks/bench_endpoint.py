"""Serving a trivial scoring script: through an mltrain endpoint against the same script under Azure's inference
server started by hand (`azmlinfsrv --entry_script score.py --port P`, what a user runs without mltrain).

Both are the same server (azureml-inference-server-http, from mltrain's layer of it) with one worker; mltrain's
adds its endpoint app in the same process (the key check, the traffic rule). Both log to a file. The client sends requests one after
another, each on a new connection (gunicorn's sync workers close every connection, on both sides), with the key
on mltrain's side. Rounds alternate between the two; prints each side's median p50/p99 latency and requests/s,
and the ratios. Also: endpoints of two deployments at 50/50 and at 90/10, against one deployment (each answer
names its deployment: the split is counted per round, and the deployments' access logs show whether any request
was passed on from one to the other), and the start-up of each side, command start to the first answer, in
rounds of their own, alternating (`mltrain endpoints create` + `deploy`, the key read from the endpoint's folder).

Usage: .venv/bin/python benchmarks/bench_endpoint.py [--requests 1000] [--rounds 5] [--starts 5] [--check]
(--check: exit 1 unless every round's split is within 5 points of the rule and nothing was passed on)
"""
from __future__ import annotations

import argparse
import collections
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
from typing import Any, Dict, List, Optional, Tuple

MLTRAIN = str(Path(sys.executable).with_name("mltrain"))
#: the answer names the deployment (Azure's server gets SERVICE_NAME endpoint/deployment from mltrain; by hand: null)
SCORE = ("import json, os\ndef init():\n    pass\ndef run(raw_data):\n"
         "    return {'data': json.loads(raw_data)['data'], 'who': os.environ.get('SERVICE_NAME')}\n")
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


def one(port: int, headers: Dict[str, str], answers: Optional[List[bytes]] = None) -> Tuple[int, float]:
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/score", BODY, {"Content-Type": "application/json", **headers})
    r = c.getresponse()
    body = r.read()
    c.close()
    dt = time.perf_counter() - t
    if answers is not None:
        answers.append(body)
    return r.status, dt


def measure(port: int, headers: Dict[str, str], n: int) -> Dict[str, Any]:
    times, answers = [], []
    for _ in range(n):
        status, dt = one(port, headers, answers)
        assert status == 200, status
        times.append(dt)
    times.sort()
    who = collections.Counter(str(json.loads(a)["who"]).rpartition("/")[2] for a in answers)
    return {"p50": times[n // 2] * 1e3, "p99": times[int(n * 0.99)] * 1e3, "rps": n / sum(times), "who": who}


def mltrain(env: Dict[str, str], cwd: Path, *args: str) -> str:
    out = subprocess.run([MLTRAIN, *args], env=env, cwd=cwd, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    return out.stdout


def port_of(env: Dict[str, str], name: str) -> int:
    return int(json.loads((Path(env["MLTRAIN_HOME"]) / "endpoints" / name / "endpoint.json").read_text())["port"])


def key_of(env: Dict[str, str], name: str) -> Dict[str, str]:
    keys = json.loads((Path(env["MLTRAIN_HOME"]) / "endpoints" / name / "keys.json").read_text())
    return {"Authorization": f"Bearer {keys['primaryKey']}"}


def start_by_hand(env: Dict[str, str], layer: str, work: Path) -> float:
    """Azure's server by hand, its log to a file as mltrain's deployments keep theirs: spawn to first answer."""
    port = free_port()
    with open(work / "by-hand.log", "wb") as log:
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "azureml_inference_server_http.amlserver", "--entry_script",
                                 "score.py", "--port", str(port)], cwd=work / "code", env={**env, "PYTHONPATH": layer},
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_answer(port, {})
            return time.perf_counter() - t
        finally:
            os.killpg(proc.pid, 9)
            proc.wait()


def start_mltrain(env: Dict[str, str], work: Path, name: str) -> float:
    """`mltrain endpoints create` + `deploy`, then the first request (its key read from the endpoint's folder)."""
    t = time.perf_counter()
    mltrain(env, work, "endpoints", "create", name)
    mltrain(env, work, "endpoints", "deploy", name, "--name", "blue", "--code", "code", "--scoring-script", "score.py")
    status, _ = one(port_of(env, name), key_of(env, name))
    took = time.perf_counter() - t
    assert status == 200, status
    mltrain(env, work, "endpoints", "delete", name)
    return took


def split_endpoint(env: Dict[str, str], work: Path, name: str, blue: int) -> Tuple[int, Dict[str, str]]:
    mltrain(env, work, "endpoints", "create", name)
    for deployment in ("blue", "green"):
        mltrain(env, work, "endpoints", "deploy", name, "--name", deployment, "--code", "code", "--scoring-script",
                "score.py")
    mltrain(env, work, "endpoints", "traffic", name, f"blue={blue}", f"green={100 - blue}")
    return port_of(env, name), key_of(env, name)


def access_lines(env: Dict[str, str], name: str) -> int:
    """Requests the endpoint's deployments answered, from their logs: a request passed on is answered twice."""
    logs = (Path(env["MLTRAIN_HOME"]) / "endpoints" / name / "deployments").glob("*/server.log")
    return sum(1 for log in logs for line in log.read_text().splitlines() if "gunicorn.access" in line and "/score" in line)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--starts", type=int, default=5, help="start-up rounds (each side once a round)")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-endpoint-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home"), "MLTRAIN_TRACKING": "off", "AZUREML_LOG_LEVEL": "INFO"}
    (work / "code").mkdir()
    (work / "code" / "score.py").write_text(SCORE)
    procs: List[subprocess.Popen] = []
    names = ["bench", "open", "split", "split90"]
    try:
        layer = subprocess.run([sys.executable, "-c", "from mltrain.endpoints import inference_server as s; "
                                "print(s.ensure_layer(lambda m: None))"], env=env, capture_output=True, text=True,
                               check=True).stdout.strip()
        # start-up first, on a quiet machine: rounds alternate which side starts first
        starts: Dict[str, List[float]] = {"by hand": [], "mltrain": []}
        for r in range(args.starts):
            for side in (("by hand", "mltrain") if r % 2 == 0 else ("mltrain", "by hand")):
                starts[side].append(start_by_hand(env, layer, work) if side == "by hand"
                                    else start_mltrain(env, work, f"start{r}"))
        port = free_port()
        by_hand_log = open(work / "by-hand.log", "wb")
        procs.append(subprocess.Popen([sys.executable, "-m", "azureml_inference_server_http.amlserver",
                                       "--entry_script", "score.py", "--port", str(port)], cwd=work / "code",
                                      env={**env, "PYTHONPATH": layer}, stdout=by_hand_log,
                                      stderr=subprocess.STDOUT, start_new_session=True))
        wait_answer(port, {})
        mltrain(env, work, "endpoints", "create", "bench")
        mltrain(env, work, "endpoints", "deploy", "bench", "--name", "blue", "--code", "code", "--scoring-script",
                "score.py")
        ours, auth = port_of(env, "bench"), key_of(env, "bench")
        mltrain(env, work, "endpoints", "create", "open", "--auth-mode", "none")
        mltrain(env, work, "endpoints", "deploy", "open", "--name", "blue", "--code", "code", "--scoring-script",
                "score.py")
        split, split_key = split_endpoint(env, work, "split", 50)
        split90, split90_key = split_endpoint(env, work, "split90", 90)
        # The same request as the keyed endpoint's (Azure's server ignores the header): the header alone costs
        # time on the wire and in the parsing (about 50 us here), which is the request's, not mltrain's.
        arms = {"azmlinfsrv by hand": (port, {}), "by hand, same request": (port, auth),
                "mltrain, no key": (port_of(env, "open"), {}), "mltrain, key": (ours, auth),
                "mltrain 50/50 split": (split, split_key), "mltrain 90/10 split": (split90, split90_key)}
        for p, h in arms.values():
            measure(p, h, 100)  # warm-up
        results: Dict[str, List[Dict[str, Any]]] = {k: [] for k in arms}
        for r in range(args.rounds):
            order = list(arms) if r % 2 == 0 else list(reversed(list(arms)))
            for name in order:
                results[name].append(measure(*arms[name], args.requests))
        print(f"{args.requests} sequential requests x {args.rounds} rounds, alternating; medians of the rounds; "
              "ratios against Azure's server given the same request (the splits: against one mltrain deployment)")
        print(f"{'':<22} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} {'p50 ratio':>10} {'p99 ratio':>10}")
        for name, rows in results.items():
            base = results["azmlinfsrv by hand" if name in ("azmlinfsrv by hand", "mltrain, no key")
                           else "mltrain, key" if "split" in name else "by hand, same request"]
            p50 = statistics.median(r["p50"] for r in rows)
            p99 = statistics.median(r["p99"] for r in rows)
            rps = statistics.median(r["rps"] for r in rows)
            r50 = statistics.median(a["p50"] / b["p50"] for a, b in zip(rows, base))
            r99 = statistics.median(a["p99"] / b["p99"] for a, b in zip(rows, base))
            print(f"{name:<22} {p50:>8.3f} {p99:>8.3f} {rps:>8.0f} {r50:>10.3f} {r99:>10.3f}")
        failed = False
        for name, endpoint, want in (("mltrain 50/50 split", "split", 50), ("mltrain 90/10 split", "split90", 90)):
            shares = [100 * r["who"]["blue"] / args.requests for r in results[name]]
            passed_on = access_lines(env, endpoint) - (100 + args.rounds * args.requests)
            off = max(abs(s - want) for s in shares)
            failed |= off > 5 or passed_on != 0
            print(f"{name}: blue's share per round {', '.join(f'{s:.1f}%' for s in shares)} (rule {want}%, "
                  f"furthest {off:.1f} points); requests passed on between deployments: {passed_on}")
        by_hand, ours_s = statistics.median(starts["by hand"]), statistics.median(starts["mltrain"])
        ratio = statistics.median(m / b for m, b in zip(starts["mltrain"], starts["by hand"]))
        print(f"start-up to the first answer, {args.starts} rounds alternating, medians: azmlinfsrv by hand "
              f"{by_hand:.3f} s; mltrain endpoints create + deploy {ours_s:.3f} s; ratio {ratio:.2f} "
              f"(by hand {', '.join(f'{x:.2f}' for x in starts['by hand'])}; mltrain "
              f"{', '.join(f'{x:.2f}' for x in starts['mltrain'])})")
        if args.check and failed:
            raise SystemExit("a split strayed more than 5 points from its rule, or requests were passed on")
    finally:
        for name in names:
            subprocess.run([MLTRAIN, "endpoints", "delete", name], env=env, capture_output=True)
        for proc in procs:
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
