"""A checkpointing 2-rank DDP run (gloo): 8 epochs, each an all-reduce; rank 0 saves a checkpoint every epoch,
and a run started again in its folder (`runs resume`) goes on from it."""
from __future__ import annotations

import json
from typing import Dict, List, Optional, Tuple

from .scenario import Scenario, status_violation

EPOCHS = 8

DDP = '''
import json, os, time
import torch, torch.distributed as dist
from mltrain import run
dist.init_process_group("gloo")
rank = dist.get_rank()
folder = os.path.join(os.environ["MLTRAIN_RUN_DIR"], "checkpoints")
os.makedirs(folder, exist_ok=True)
path = os.path.join(folder, "state.json")
state = json.load(open(path)) if os.path.exists(path) else {"epoch": 0, "done": []}
for epoch in range(state["epoch"] + 1, EPOCHS + 1):
    t = torch.tensor([float(epoch)])
    dist.all_reduce(t)
    time.sleep(PAUSE)
    if rank == 0:
        state = {"epoch": epoch, "done": state["done"] + [epoch], "sum": t.item()}
        tmp = path + ".tmp"
        with open(tmp, "w") as f:  # closed before the rename: a full disk fails here, never an empty checkpoint
            json.dump(state, f)
        os.replace(tmp, path)
        mark("epoch%d" % epoch)
        run.log("loss", 1.0 / epoch, step=epoch)
    else:
        state = {"epoch": epoch, "done": state["done"] + [epoch]}
    dist.barrier()
dist.destroy_process_group()
'''.replace("EPOCHS", str(EPOCHS))


class DdpCheckpoint(Scenario):
    name = "ddp_checkpoint"
    faults = ("kill_driver", "sigint_foreground", "sigterm_foreground", "kill_rank", "full_disk")
    units = EPOCHS
    unit_s = 0.5
    limit_s = 150.0
    extra: Tuple[str, ...] = ()

    #: Seconds each epoch takes beside its all-reduce.
    pause: float = 0.3

    def setup(self) -> None:
        self.write("ddp.py", DDP.replace("PAUSE", str(self.pause)))

    def start(self):
        self.proc = self.t.start("job=script", "job.script=ddp.py", "distribution=pytorch",
                                 "distribution.process_count_per_node=2", "run.id=ddp", "run.console=none",
                                 *self.extra)
        return self.proc

    def record(self) -> Optional[dict]:
        return self.run_record("ddp")

    def recover(self, fault: str) -> None:
        self.resume_run("ddp")

    def expected_units(self, fault: str) -> Dict[str, Tuple[int, int]]:
        return {f"epoch{e}": (1, 1) for e in range(1, EPOCHS + 1)}

    def check(self, fault: str) -> List[str]:
        rec = self.record()
        if rec is None:
            return ["run: no record of the run"]
        out = status_violation("the run", rec.get("status"), "Completed")
        path = self.t.home / "runs" / "ddp" / "checkpoints" / "state.json"
        try:
            state = json.loads(path.read_text()) if path.exists() else {}
        except ValueError:
            return out + [f"outputs: the checkpoint {path} is unreadable"]
        if state.get("done") != list(range(1, EPOCHS + 1)):
            out.append(f"outputs: the checkpoint's epochs are {state.get('done')}, expected 1..{EPOCHS} once each")
        return out + self.metric_violations(rec, "loss", EPOCHS)

    def running_rank_pids(self) -> List[Tuple[str, int]]:
        rec = self.record() or {}
        if rec.get("status") != "Running":
            return []
        return [(f"rank{r}", int(v["pid"])) for r, v in (rec.get("ranks") or {}).items() if v.get("pid")]
