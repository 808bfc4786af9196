"""The Designer's training loop (seed 003): SGD with momentum, effective learning rate
`learning_rate x world_size`, linear warmup over `warmup_epochs`, polynomial decay after, early
stopping after `patience` epochs without a lower validation loss, a log line every
`print_frequency` iterations, a NaN loss stopping the run. DDP when world_size > 1; AMP and
channels-last on a GPU. Checkpoints every epoch; `resume()` is the explicit entry a requeue calls.
"""
from __future__ import annotations

import contextlib
import copy
import errno
import json
import math
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, DistributedSampler, Subset

from mltrain.base.atomic import atomic_write
from mltrain.components import data, image_input, prefetch
from mltrain.components.designer_errors import DiskFullError, NaNLossError
from mltrain.components.runtime import RankContext, process_group
from mltrain.runs.metrics import MetricsWriter, iter_metrics

POLY_POWER = 0.9
LATEST = "latest.pt"
#: Free bytes under which a failed write is taken for a full device (torch's writer does not say ENOSPC).
FULL_BYTES = 1 << 20


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n / 1024:.0f} KiB"


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np  # optional

        np.random.seed(seed)
    except ImportError:
        pass


def lr_factor(iteration: int, warmup_iters: int, total_iters: int) -> float:
    """Linear warmup to 1, then polynomial decay towards 0 at the last iteration."""
    if iteration < warmup_iters:
        return (iteration + 1) / warmup_iters
    span = max(1, total_iters - warmup_iters)
    return max(0.0, 1.0 - (iteration - warmup_iters) / span) ** POLY_POWER


def sgd(model: nn.Module, lr: float, momentum: float, weight_decay: float, fused: bool) -> torch.optim.SGD:
    """SGD with momentum; `fused`: torch's one-kernel step, which takes GradScaler's scale and inf check on the
    device. Its momentum buffers are made zeros first: on a step GradScaler skips (an fp16 overflow, routine in
    AMP's first steps) the fused kernel creates the buffer but leaves it unwritten, and the next step reads that
    memory (on an H200, torch 2.11: ResNet-50's loss NaN within the first epoch). From zeros, with dampening 0,
    the first real step is the one torch takes from no buffer (buf = grad): training is unchanged."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay,
                          **({"fused": True} if fused else {}))
    if fused and momentum:
        for group in opt.param_groups:
            for param in group["params"]:
                opt.state[param]["momentum_buffer"] = torch.zeros_like(param, memory_format=torch.preserve_format)
    return opt


@dataclass
class TrainState:
    epoch: int = 0  # epochs completed
    best_val_loss: float = math.inf
    best_epoch: int = 0
    epochs_without_improvement: int = 0
    history: List[Dict[str, float]] = field(default_factory=list)


class Trainer:
    def __init__(self, ctx: RankContext, model: nn.Module, train_ds, val_ds, class_names: List[str]):
        self.ctx, self.cfg, self.t = ctx, ctx.cfg, ctx.cfg.trainer
        self.class_names = class_names
        self.device = self._device()
        self.cuda = self.device.type == "cuda"
        self.model = model.to(self.device)
        if self.cuda:
            self.model = self.model.to(memory_format=torch.channels_last)
            torch.backends.cudnn.benchmark = True
        # Gradients are averaged by DDP, or under Horovod by its DistributedOptimizer (set up below).
        self.ddp = nn.parallel.DistributedDataParallel(
            self.model, device_ids=[self.device.index] if self.cuda else None) \
            if ctx.distributed and not ctx.horovod else None
        # How the images reach the device (trainer.input): decoded by the loader's workers (cpu) or on the GPU (gpu)
        self.input = image_input.for_trainer(self.cfg, self.device, train_ds, val_ds, *data.input_plan(self.cfg))
        train_ds, val_ds = self.input.train, self.input.val
        self.sampler = DistributedSampler(train_ds, num_replicas=ctx.world_size, rank=ctx.rank, shuffle=True,
                                          seed=int(self.t.seed))
        loader_args = dict(batch_size=int(self.t.batch_size), collate_fn=self.input.collate,
                           **image_input.loader_settings(int(self.cfg.data.num_workers), self.cuda))
        self.train_loader = DataLoader(train_ds, sampler=self.sampler, drop_last=False, **loader_args)
        # Validation is sharded without padding, so the reduced metrics count every image exactly once.
        self.val_loader = DataLoader(Subset(val_ds, range(ctx.rank, len(val_ds), ctx.world_size)),
                                     shuffle=False, **loader_args)
        self.effective_lr = float(self.t.learning_rate) * ctx.world_size
        # On a GPU the fused SGD kernel takes GradScaler's scale and inf check as tensors: no host synchronisation
        # per step (the unfused step reads found_inf on the host every iteration). Horovod wraps its own.
        self.fused = self.cuda and not ctx.horovod
        self.optimizer = sgd(self.model, self.effective_lr, float(self.t.momentum), float(self.t.weight_decay), self.fused)
        if ctx.horovod:
            import horovod.torch as hvd  # heavy

            self.optimizer = hvd.DistributedOptimizer(self.optimizer, named_parameters=self.model.named_parameters())
        iters = len(self.train_loader)
        total, warmup = iters * int(self.t.epochs), iters * int(self.t.warmup_epochs)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda it: lr_factor(it, warmup, total))
        self.amp = self.cuda and bool(self.t.amp)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp)
        self.criterion = nn.CrossEntropyLoss()
        self.state = TrainState()
        self.best_weights: Optional[Dict[str, torch.Tensor]] = None
        self.ckpt_dir = ctx.run_dir / "checkpoints"
        self.metrics = MetricsWriter(ctx.run_dir / "metrics.jsonl", rank=ctx.rank)
        self.tb = self._tensorboard()
        # The driver says whether its terminal is a TTY: rank output itself always goes to a pipe.
        self.progress = ctx.is_main and os.environ.get("MLTRAIN_TTY") == "1"

    # ---------------------------------------------------------------------------- set-up
    def _device(self) -> torch.device:
        if torch.cuda.is_available() and process_group() != "gloo":  # a gloo process group keeps to the CPU
            return torch.device("cuda", self.ctx.local_rank % torch.cuda.device_count())
        return torch.device("cpu")

    def _tensorboard(self):
        if not self.ctx.is_main:
            return None
        try:
            from torch.utils.tensorboard import SummaryWriter  # optional
        except ImportError:  # tensorboard is optional
            return None
        return SummaryWriter(str(self.ctx.run_dir / "tensorboard"))

    def log(self, text: str) -> None:
        if not self.ctx.is_main:
            return
        if self.progress:  # clear the bar, print the line, the bar is redrawn after it
            sys.stdout.write("\r\x1b[K" + text + "\n")
            sys.stdout.flush()
        else:
            print(text, flush=True)

    def _bar(self, epoch: int, i: int, n: int, rate: float) -> None:
        width = 30
        done = int(width * i / n)
        sys.stdout.write(f"\repoch {epoch}/{self.t.epochs} |{'#' * done}{'.' * (width - done)}| {i}/{n} {rate:.0f} img/s")
        sys.stdout.flush()

    # ---------------------------------------------------------------------------- checkpoints
    def _best_path(self, epoch: int) -> Path:
        return self.ckpt_dir / f"best_epoch_{epoch}.pt"

    def save_best(self) -> None:
        """Rank 0 keeps the best weights in a file of their own, written only when validation
        improves (not a second full copy of the model inside every epoch's checkpoint)."""
        if not self.ctx.is_main or self.best_weights is None:
            return
        self.ckpt_dir.mkdir(exist_ok=True)
        self._save(self.best_weights, self.ckpt_dir / ".best.tmp.pt", self._best_path(self.state.best_epoch))

    def _save(self, obj: object, tmp: Path, final: Path) -> None:
        """torch.save to a temporary name, renamed into place: a write that fails leaves the earlier
        files as they were. A full disk is one line naming the file and the space (torch's own error
        is an `enforce fail at inline_container.cc` with neither), and the partial file is removed."""
        try:
            torch.save(obj, tmp)
        except (OSError, RuntimeError) as exc:
            # measured before the partial file goes: a full device has next to nothing free now
            written = tmp.stat().st_size if tmp.exists() else 0
            full = isinstance(exc, OSError) and exc.errno == errno.ENOSPC or shutil.disk_usage(tmp.parent).free < FULL_BYTES
            tmp.unlink(missing_ok=True)
            if not full:
                raise
            latest = self.ckpt_dir / LATEST
            kept = f"; the previous checkpoint {latest.resolve().name} is kept" if latest.exists() else ""
            raise DiskFullError(f"no space left on device writing {final} ({_size(written)} written before the device "
                                f"filled; {_size(shutil.disk_usage(tmp.parent).free)} free on it now){kept}") from None
        os.replace(tmp, final)

    def checkpoint(self) -> None:
        """Rank 0 saves the full training state; written to a temporary name, then renamed. Best
        weights of earlier improvements are removed once this checkpoint no longer names them."""
        if not self.ctx.is_main:
            return
        self.ckpt_dir.mkdir(exist_ok=True)
        payload = {
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(), "scaler": self.scaler.state_dict(),
            "state": self.state.__dict__, "rng": torch.get_rng_state(), "class_names": self.class_names,
        }
        path = self.ckpt_dir / f"epoch_{self.state.epoch}.pt"
        self._save(payload, self.ckpt_dir / ".tmp.pt", path)
        tmp_link = self.ckpt_dir / ".latest.tmp"
        if tmp_link.is_symlink() or tmp_link.exists():
            tmp_link.unlink()
        tmp_link.symlink_to(path.name)
        os.replace(tmp_link, self.ckpt_dir / LATEST)
        for old in self.ckpt_dir.glob("best_epoch_*.pt"):
            if old != self._best_path(self.state.best_epoch):
                old.unlink(missing_ok=True)
        keep = int(self.t.get("keep_checkpoints", 0))  # absent in a job frozen before the key existed
        if keep:
            epochs = sorted(self.ckpt_dir.glob("epoch_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
            for old in epochs[:-keep]:  # after latest.pt names the new one: a kill here loses nothing
                old.unlink(missing_ok=True)

    def resume(self) -> int:
        """Load the latest checkpoint of this run, if any, on this rank. Returns the next epoch (1-based).

        Every rank calls it (a Slurm requeue does too), so all ranks continue from the same state.
        """
        path = self.ckpt_dir / LATEST
        if not path.exists():
            return 1
        payload = torch.load(path, map_location="cpu", weights_only=False)
        if payload.get("class_names") != self.class_names:
            raise RuntimeError(f"checkpoint {path} was trained on other classes; refusing to resume")
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        for group in self.optimizer.param_groups:  # a checkpoint of another device, or of before the fused step
            if "fused" in group:
                group["fused"] = True if self.fused else None
        self.scheduler.load_state_dict(payload["scheduler"])
        self.scaler.load_state_dict(payload["scaler"])
        self.state = TrainState(**payload["state"])
        if "best_weights" in payload:  # checkpoints of 0.2.0 carried a copy of the best weights
            self.best_weights = payload["best_weights"]
        elif self._best_path(self.state.best_epoch).is_file():
            self.best_weights = torch.load(self._best_path(self.state.best_epoch), map_location="cpu", weights_only=True)
        torch.set_rng_state(payload["rng"])
        self.log(f"resumed from {path.resolve().name}: {self.state.epoch} epoch(s) already done")
        self._log_missing_epoch()
        return self.state.epoch + 1

    def _log_missing_epoch(self) -> None:
        """An epoch is checkpointed before its metrics are logged: if the run stopped in between, the
        resumed run logs that epoch's metrics now (once), instead of training the epoch again."""
        if not self.ctx.is_main or not self.state.history:
            return
        last = self.state.history[-1]
        epoch = last["epoch"]
        if any(r.get("step") == epoch and r.get("rank", 0) == 0 for r in iter_metrics(self.metrics.path)):
            return
        self.metrics.log_many({k: v for k, v in last.items() if k != "epoch"}, step=epoch)

    # ---------------------------------------------------------------------------- loop

    def _check_finite(self, loss_sum: torch.Tensor, epoch: int, iteration: int) -> None:
        bad = torch.tensor([0.0 if torch.isfinite(loss_sum).item() else 1.0], device=self.device)
        if self.ctx.distributed:
            dist.all_reduce(bad)  # every rank stops together instead of hanging in the next all-reduce
        if bad.item() > 0:
            raise NaNLossError(
                f"training loss became NaN at epoch {epoch}, iteration {iteration}; try a lower learning rate "
                f"(trainer.learning_rate={self.t.learning_rate}, effective {self.effective_lr:g})")

    def train_epoch(self, epoch: int) -> Dict[str, float]:
        net = self.ddp or self.model
        net.train()
        self.sampler.set_epoch(epoch)
        n_iters, freq = len(self.train_loader), int(self.t.print_frequency)
        loss_sum = torch.zeros((), device=self.device)
        seen, start = 0, time.perf_counter()
        ready = prefetch.batches(self.train_loader, self.input.prepare_train, self.device)
        with contextlib.closing(ready):  # an error in the step stops the prefetching thread now, not at exit
            for i, (images, labels) in enumerate(ready, 1):
                with torch.autocast(self.device.type, dtype=torch.float16, enabled=self.amp):
                    loss = self.criterion(net(images), labels)
                self.optimizer.zero_grad()  # None gradients: torch's default, and Horovod's zero_grad takes no argument
                self.scaler.scale(loss).backward()
                if self.ctx.horovod and self.amp:
                    # Horovod's documented AMP order: reduce the gradients, unscale, then step without a second reduce
                    self.optimizer.synchronize()
                    self.scaler.unscale_(self.optimizer)
                    with self.optimizer.skip_synchronize():
                        self.scaler.step(self.optimizer)
                else:
                    self.scaler.step(self.optimizer)
                self.scaler.update()
                self.scheduler.step()
                loss_sum += loss.detach() * labels.size(0)
                seen += labels.size(0)
                if self.progress:
                    self._bar(epoch, i, n_iters, seen * self.ctx.world_size / (time.perf_counter() - start))
                if i % freq == 0 or i == n_iters:
                    self._check_finite(loss_sum, epoch, i)
                    now = time.perf_counter()
                    self.log(f"epoch {epoch}/{self.t.epochs} iter {i}/{n_iters} loss {loss.item():.4f} "
                             f"lr {self.scheduler.get_last_lr()[0]:.6f} ({seen * self.ctx.world_size / (now - start):.1f} img/s)")
        if self.cuda:
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        totals = torch.tensor([loss_sum.item(), float(seen)], device=self.device, dtype=torch.float64)
        if self.ctx.distributed:
            dist.all_reduce(totals)
        return {"train_loss": totals[0].item() / totals[1].item(),
                "train_images_per_second": totals[1].item() / elapsed}

    @torch.no_grad()
    def validate(self) -> Dict[str, float]:
        self.model.eval()
        k = min(5, len(self.class_names))
        sums = torch.zeros(4, dtype=torch.float64, device=self.device)  # loss, top1, top5, count
        ready = prefetch.batches(self.val_loader, self.input.prepare_val, self.device)
        with contextlib.closing(ready):
            for images, labels in ready:
                with torch.autocast(self.device.type, dtype=torch.float16, enabled=self.amp):
                    logits = self.model(images)
                loss = nn.functional.cross_entropy(logits.float(), labels, reduction="sum")
                topk = logits.topk(k, dim=1).indices
                hits = topk.eq(labels.unsqueeze(1))
                sums += torch.stack([loss.double(), hits[:, 0].sum().double(), hits.any(dim=1).sum().double(),
                                     torch.tensor(float(labels.numel()), device=self.device, dtype=torch.float64)])
        if self.ctx.distributed:
            dist.all_reduce(sums)
        loss, top1, top5, count = sums.tolist()
        return {"val_loss": loss / count, "top1_accuracy": top1 / count, "top5_accuracy": top5 / count}

    def fit(self, start_epoch: int = 1) -> TrainState:
        epochs = int(self.t.epochs)
        self.log(f"training {type(self.model).__name__} on {len(self.train_loader.dataset)} images, "
                 f"{len(self.class_names)} classes, {self.ctx.world_size} rank(s) on {self.device}, "
                 f"effective learning rate {self.effective_lr:g}"
                 + (" (gradients through Horovod)" if self.ctx.horovod else ""))
        self.log(f"input: {self.input.name} path ({self.input.why}; {self.train_loader.num_workers} loader worker(s))")
        if self.ctx.is_main:  # the record of which path ran, read by `runs show`'s metrics and the tests
            self.metrics.log("input_pipeline", self.input.name, step=start_epoch)
        if self.ctx.horovod:
            import horovod.torch as hvd  # heavy

            # Every rank starts from rank 0's weights, and after a resume from its optimizer state. Not on a
            # fresh start: the state is empty on every rank, and Horovod would fill it by stepping the
            # optimizer once with zero gradients, which with weight decay moves the weights and seeds the
            # momentum (training then differs from DDP's from the first iteration).
            hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)
            if start_epoch > 1:
                hvd.broadcast_optimizer_state(self.optimizer, root_rank=0)
        for epoch in range(start_epoch, epochs + 1):
            train = self.train_epoch(epoch)
            if self.ctx.horovod:
                # DDP broadcasts rank 0's buffers (BatchNorm running statistics) at every forward; Horovod
                # averages gradients only, so without this each rank would validate with statistics of its
                # own shard alone, and the reduced metrics would not be those of the model rank 0 saves.
                hvd.broadcast_parameters(dict(self.model.named_buffers()), root_rank=0)
            results = {**train, **self.validate(),
                       "learning_rate": self.scheduler.get_last_lr()[0]}
            self._after_epoch(epoch, results)
            if self.state.epochs_without_improvement >= int(self.t.patience):
                self.log(f"early stopping: validation loss has not improved for {self.t.patience} epoch(s) "
                         f"(best {self.state.best_val_loss:.4f} at epoch {self.state.best_epoch})")
                break
        if self.tb is not None:
            self.tb.close()
        return self.state

    def _after_epoch(self, epoch: int, results: Dict[str, float]) -> None:
        if not math.isfinite(results["val_loss"]):  # the reduced value: every rank stops here together
            raise NaNLossError(
                f"validation loss is {results['val_loss']} after epoch {epoch}: the model diverged; try a lower "
                f"learning rate (trainer.learning_rate={self.t.learning_rate}, effective {self.effective_lr:g})")
        s = self.state
        s.epoch = epoch
        if results["val_loss"] < s.best_val_loss:
            s.best_val_loss, s.best_epoch, s.epochs_without_improvement = results["val_loss"], epoch, 0
            if self.ctx.is_main:
                self.best_weights = copy.deepcopy({k: v.cpu() for k, v in self.model.state_dict().items()})
                self.save_best()
        else:
            s.epochs_without_improvement += 1
        s.history.append({"epoch": epoch, **results})
        # The checkpoint first, then the metrics: a run stopped between the two resumes after this
        # epoch and logs its metrics then (_log_missing_epoch); the other order trained it twice.
        self.checkpoint()
        self.log(f"epoch {epoch}: " + "  ".join(f"{k} {v:.4f}" for k, v in results.items()))
        if self.ctx.is_main:
            self.metrics.log_many(results, step=epoch)
            if self.tb is not None:
                for name, value in results.items():
                    self.tb.add_scalar(name, value, epoch)


def write_summary(path: Path, state: TrainState) -> None:
    atomic_write(path, json.dumps(state.__dict__, indent=2))

