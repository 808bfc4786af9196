"""A node lost under a checkpointing job (the DDP scenario, one node of the two-node Slurm test cluster): Slurm
marks the node down, the job runs again on the other node from its last checkpoint, and the loss is recorded."""
from __future__ import annotations

from typing import List

from .local_ddp import DdpCheckpoint


class SlurmNodeLoss(DdpCheckpoint):
    name = "slurm2_node_loss"
    needs = "slurm2"
    faults = ("lose_node",)
    unit_s = 1.5
    pause = 1.5  # the job must still run when its node dies: 12 s of epochs
    limit_s = 300.0
    weight = 1  # a minute a trial: Slurm's SlurmdTimeout, then its requeue delay
    extra = ("compute=slurm",)

    def recover(self, fault: str) -> None:
        try:
            self.rc = self.wait_foreground()
        finally:
            node = getattr(self, "lost_node", None)
            if node:  # the machine comes back (the cluster is shared with the next trials)
                from slurm_support import start_slurmd

                start_slurmd(self.t.slurm_conf or "", node)
        self.resume_run("ddp")

    def check(self, fault: str) -> List[str]:
        out = super().check(fault)
        rec = self.record() or {}
        node = getattr(self, "lost_node", None)
        if node:
            lost = [f for f in rec.get("node_failures") or [] if node in " ".join(map(str, f.get("lost") or []))
                    or f.get("nodes") == node]
            if not lost:
                out.append(f"record: node {node} was lost under the job, and run.json's node_failures does not say so")
            shown = self.t.mltrain("runs", "show", "ddp")
            if "node lost" not in shown.out:
                out.append("runs show: the lost node is not listed")
        return out
