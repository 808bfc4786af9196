"""What every built-in component does first in a rank: read the frozen config, join the process group."""
from __future__ import annotations

import datetime
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from omegaconf import OmegaConf

from mltrain.base.errors import MltrainError
from mltrain.ranks.script_main import exit_code_of, finish


@dataclass
class RankContext:
    rank: int
    world_size: int
    local_rank: int
    run_dir: Path
    cfg: Any

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def horovod(self) -> bool:
        """distribution=mpi distribution.horovod=true: gradients go through Horovod, as Azure ran MPI jobs."""
        return bool(self.cfg.distribution.get("horovod"))

    @property
    def outputs_dir(self) -> Path:
        return Path(os.environ.get("MLTRAIN_OUTPUTS_DIR", self.run_dir / "outputs"))


def load_context() -> RankContext:
    """The frozen config of this run (never re-resolved) and this rank's place in the world."""
    run_dir = Path(os.environ["MLTRAIN_RUN_DIR"])
    cfg = OmegaConf.load(run_dir / "config.yaml")
    return RankContext(
        rank=int(os.environ.get("RANK", "0")),
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        run_dir=run_dir,
        cfg=cfg,
    )


def init_distributed(ctx: RankContext) -> None:
    """torch.distributed from the env:// contract every backend sets (RANK, WORLD_SIZE, MASTER_*), and
    Horovod (hvd.init over MPI) when the job asks for it."""
    if ctx.horovod:
        import horovod.torch as hvd  # heavy

        hvd.init()
        if hvd.size() != ctx.world_size or hvd.rank() != ctx.rank:
            raise RuntimeError(f"Horovod sees rank {hvd.rank()} of {hvd.size()}, mltrain {ctx.rank} of {ctx.world_size}")
    if not ctx.distributed:
        return
    import torch.distributed as dist  # heavy

    # a rank of a distributed job is always told its process group; gloo if one was started by hand
    backend = process_group() or "gloo"
    timeout = datetime.timedelta(seconds=float(os.environ.get("MLTRAIN_DIST_TIMEOUT_S", "1800")))
    if backend == "nccl":
        import torch  # heavy

        # LOCAL_RANK picks the device (torchrun's convention) when the rank sees its node's devices; a rank
        # given exactly its own (Slurm's --gpus-per-task, the local pool's per-rank devices) sees one: cuda:0
        torch.cuda.set_device(ctx.local_rank % max(1, torch.cuda.device_count()))
    dist.init_process_group(backend, init_method="env://", rank=ctx.rank, world_size=ctx.world_size, timeout=timeout)


def process_group() -> Optional[str]:
    """The torch.distributed backend the driver chose for this job's ranks (gloo | nccl), None for a
    single process (which then uses a GPU when one is visible)."""
    return os.environ.get("MLTRAIN_BACKEND") or None


def shutdown_distributed(ctx: RankContext) -> None:
    if ctx.horovod:
        import horovod.torch as hvd  # heavy

        hvd.shutdown()
    if ctx.distributed:
        import torch.distributed as dist  # heavy

        if dist.is_initialized():
            # Leave together: a rank tearing its process group down while rank 0 (which hosts the
            # rendezvous store) is still working can abort in gloo's teardown.
            dist.barrier()
            dist.destroy_process_group()


def run_component(body) -> None:
    """Run a component's body; a Designer error ends the rank with its one-line message. The rank then
    leaves as a user's script does (mltrain.ranks.script_main.finish): its exit code, no native teardown."""
    code = 0
    try:
        ctx = load_context()
        try:
            init_distributed(ctx)
            body(ctx)
        except MltrainError as exc:
            print(f"error: {exc}", file=sys.stderr, flush=True)
            code = exc.exit_code
        finally:
            shutdown_distributed(ctx)
    except SystemExit as exc:
        code = exit_code_of(exc)
    except Exception:  # noqa: BLE001 - reported as the interpreter would, then the rank's exit code 1
        traceback.print_exc()
        code = 1
    finish(code)
