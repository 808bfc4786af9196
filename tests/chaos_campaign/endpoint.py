"""An endpoint with two deployments: blue made before the trial, green deployed by the foreground command;
the faults reach the deploy (Ctrl-C, SIGTERM) or a server (SIGKILL, then `endpoints restart`)."""
from __future__ import annotations

import json
from typing import Dict, List, Tuple

from .scenario import Scenario

SCORE = '''
import json
def init():
    mark("init-COLOR")
def run(raw_data):
    return {"deployment": "COLOR", "data": json.loads(raw_data)["data"]}
'''


class Endpoint(Scenario):
    name = "endpoint"
    faults = ("sigint_foreground", "sigterm_foreground", "kill_server")
    units = 1
    unit_s = 3.0
    limit_s = 120.0

    def setup(self) -> None:
        for color in ("blue", "green"):
            self.write(f"{color}/score.py", SCORE.replace("COLOR", color))
        self.write("model/weights.txt", "1\n")
        for args in (("models", "register", "chaos-model", "--path", "model"), ("endpoints", "create", "chaos-api"),
                     ("endpoints", "deploy", "chaos-api", "--name", "blue", "--model", "chaos-model", "--code", "blue",
                      "--scoring-script", "score.py")):
            done = self.t.mltrain(*args, timeout=180)
            if done.rc != 0:
                raise RuntimeError(f"set-up step {' '.join(args)} exited {done.rc}: {done.err.strip()[-300:]}")
        self.before = self.endpoint_record()

    def start(self):
        self.proc = self.t.start("endpoints", "deploy", "chaos-api", "--name", "green", "--model", "chaos-model",
                                 "--code", "green", "--scoring-script", "score.py")
        return self.proc

    def endpoint_record(self) -> dict:
        path = self.t.home / "endpoints" / "chaos-api" / "endpoint.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def deployment(self, name: str) -> dict:
        path = self.t.home / "endpoints" / "chaos-api" / "deployments" / name / "deployment.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def recover(self, fault: str) -> None:
        self.rc = self.wait_foreground()
        if fault == "kill_server":
            done = self.t.mltrain("endpoints", "restart", "chaos-api", timeout=180)
            if done.rc != 0:
                self.notes.append(f"endpoints restart exited {done.rc}: {done.err.strip()[-300:]}")

    def expected_units(self, fault: str) -> Dict[str, Tuple[int, int]]:
        return {"init-blue": (1, 2), "init-green": (0, 2)}  # a restart runs init() again

    def check(self, fault: str) -> List[str]:
        out: List[str] = []
        green = self.deployment("green")
        interrupted = fault in ("sigint_foreground", "sigterm_foreground") and self.rc not in (0,)
        if interrupted:
            # 130, as every interrupted mltrain command ends (a run's driver too), on SIGINT and SIGTERM alike; or the
            # signal itself, when it came before the command could take it (nothing made yet: checked below)
            signum = 2 if fault == "sigint_foreground" else 15
            if self.rc not in (130, -signum):
                out.append(f"deploy: interrupted, it exited {self.rc}, expected 130")
            if green and green.get("state") != "Failed":
                out.append(f"record: the interrupted deployment green is listed {green.get('state')}")
            if self.endpoint_record().get("traffic") != self.before.get("traffic"):
                out.append("record: the interrupted deploy changed the endpoint's traffic")
        elif self.rc != 0:
            out.append(f"deploy: exited {self.rc} without being interrupted")
        names = ["blue"] + (["green"] if green and not interrupted else [])
        for name in names:
            done = self.t.mltrain("endpoints", "invoke", "chaos-api", "--deployment", name, "--data",
                                  '{"data": [1, 2]}', timeout=60)
            if done.rc != 0 or f'"{name}"' not in done.out:
                out.append(f"invoke: deployment {name} did not answer after recovery (exit {done.rc}): "
                           f"{(done.err or done.out).strip()[-200:]}")
            if self.deployment(name).get("state") != "Succeeded":
                out.append(f"record: deployment {name} is {self.deployment(name).get('state')} after recovery")
        done = self.t.mltrain("endpoints", "delete", "chaos-api", timeout=120)
        if done.rc != 0:
            out.append(f"delete: exited {done.rc}: {done.err.strip()[-200:]}")
        return out

    def server_pids(self) -> List[Tuple[str, int]]:
        found = []
        for name in ("blue", "green"):
            d = self.deployment(name)
            if d.get("pid") and d.get("state") == "Succeeded":
                found.append((name, int(d["pid"])))
        return found
