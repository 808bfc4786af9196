"""Azure ML's parallel job, one rank per node: this node's agent and workers (mltrain.parallel.agent)
over the run's shared mini-batch queue (mltrain.parallel.work_queue); rank 0 also cuts the input into
mini-batches first (mltrain.parallel.inputs) and, once every mini-batch has run or been given up,
writes the rows in input order (append_row: `parallel_run_step.txt`, or the file `append_row_to` names),
Azure's summary files under logs/user/, the progress metrics, and fails the run when a threshold was crossed.
Run as `python -m mltrain.parallel.program` in the snapshot of the job's code by the launcher.
"""
from __future__ import annotations

import ast
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

from mltrain.base.atomic import atomic_write
from mltrain.base.errors import ConfigError, MltrainError
from mltrain.components.checks import later
from mltrain.parallel.agent import Agent, Settings
from mltrain.parallel.inputs import mini_batch_size, source, split
from mltrain.parallel.work_queue import Queue
from mltrain.ranks.script_main import exit_code_of, finish
from mltrain.runs.metrics import MetricsWriter

OUTPUT_ACTIONS = ("append_row", "summary_only")
#: How long the other agents wait for rank 0 to cut the input (a large table takes a while).
PUBLISH_WAIT_S = 1800.0


class ParallelJobFailed(MltrainError):
    exit_code = 1


def validate(cfg: Any) -> None:
    """Before any worker starts: the entry script and its run(), the input, the mini-batch size, the settings."""
    job = cfg.job
    src = Path(os.path.expanduser(str(job.source_directory)))
    script = src / str(job.entry_script)
    if not script.is_file():
        raise ConfigError("job.entry_script", f"file '{job.entry_script}' does not exist in '{src}'")
    try:
        tree = ast.parse(script.read_bytes(), str(script))
    except SyntaxError as exc:
        raise ConfigError("job.entry_script", f"{script}:{exc.lineno}: {exc.msg}") from None
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    imported = {a.asname or a.name for n in tree.body if isinstance(n, (ast.ImportFrom, ast.Import)) for a in n.names}
    if "run" not in defined | imported:
        raise ConfigError("job.entry_script", f"'{job.entry_script}' defines no run(mini_batch) function")
    if job.output_action not in OUTPUT_ACTIONS:
        raise ConfigError("job.output_action", f"'{job.output_action}' is not an output action", OUTPUT_ACTIONS)
    for key in ("max_concurrency_per_instance",):
        if int(job[key]) < 1:
            raise ConfigError(f"job.{key}", f"{job[key]} is invalid; must be >= 1")
    if int(job.max_retries) < 0 or float(job.timeout) <= 0:
        raise ConfigError("job.max_retries" if int(job.max_retries) < 0 else "job.timeout", "must be positive")
    if int(cfg.distribution.process_count_per_node) != 1:
        raise ConfigError("distribution.process_count_per_node", "a parallel job runs one agent per node: set "
                          "job.max_concurrency_per_instance for its worker processes")
    if later(job.input_data):
        mini_batch_size(job.mini_batch_size, job.input_format == "tabular")  # readable as one or the other
        return
    found = source(str(job.input_data), str(job.input_format))
    mini_batch_size(job.mini_batch_size, found.tabular)


def _settings(cfg: Any, run_dir: Path, rank: int) -> Settings:
    job = cfg.job
    python = cfg.environment.python.get("interpreter") or sys.executable
    return Settings(python=str(python), entry_script=str(Path.cwd() / str(job.entry_script)),
                    arguments=[str(a) for a in job.program_arguments], concurrency=int(job.max_concurrency_per_instance),
                    max_retries=int(job.max_retries), timeout_s=float(job.timeout),
                    first_process=rank * int(job.max_concurrency_per_instance), logs=run_dir / "logs" / "user",
                    env={"AZUREML_PARALLEL_LOGGING_LEVEL": str(job.logging_level)})


class Thresholds:
    """Azure's mini_batch_error_threshold, error_threshold (items) and allowed_failed_percent, checked after
    every mini-batch; crossing one aborts the job."""

    def __init__(self, cfg: Any, queue: Queue) -> None:
        self.job = cfg.job
        self.queue = queue

    def counts(self) -> Dict[str, int]:
        failed_batches = self.queue.names("failed")
        failed_items = sum(self.queue.failed(i)["items"] for i in failed_batches) + self.queue.missing_items()
        return {"failed_batches": len(failed_batches), "failed_items": failed_items}

    def crossed(self) -> Optional[str]:
        counts = self.counts()
        limit = int(self.job.mini_batch_error_threshold)
        if limit >= 0 and counts["failed_batches"] > limit:
            return f"{counts['failed_batches']} mini-batches failed, more than mini_batch_error_threshold {limit}"
        limit = int(self.job.error_threshold)
        if limit >= 0 and counts["failed_items"] > limit:
            return f"{counts['failed_items']} items failed, more than error_threshold {limit}"
        share = self.job.get("allowed_failed_percent")
        total = sum(b["items"] for b in self.queue.batches) or 1
        if share is not None and 100.0 * counts["failed_items"] / total > float(share):
            return f"{counts['failed_items']} of {total} items failed, more than allowed_failed_percent {share}"
        return None

    def check(self) -> None:
        reason = self.crossed()
        if reason is not None:
            self.queue.abort(reason)


def _output_file(cfg: Any, run_dir: Path) -> Path:
    target = cfg.job.get("append_row_to")
    name = str(cfg.job.append_row_file_name)
    if not target:
        return Path(os.environ.get("MLTRAIN_OUTPUTS_DIR", run_dir / "outputs")) / name
    path = Path(os.path.expanduser(str(target)))
    return path / name if path.is_dir() or not path.suffix else path


def _finish(cfg: Any, queue: Queue, run_dir: Path, started: float) -> None:
    """Rank 0, once every mini-batch is over: the rows in input order, the summaries, the verdict."""
    thresholds = Thresholds(cfg, queue)
    counts = thresholds.counts()
    done, failed = sorted(queue.names("done")), sorted(queue.names("failed"))
    rows = 0
    if cfg.job.output_action == "append_row":
        out = _output_file(cfg, run_dir)
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.is_dir() and not any(out.iterdir()):  # a pipeline step's uri_file output: made as a folder, is a file
            out.rmdir()
        lines: List[str] = []
        for index in done:
            lines += queue.done(index)["rows"]
        rows = len(lines)
        atomic_write(out, "".join(line + "\n" for line in lines))
    total = len(queue.batches)
    writer = MetricsWriter(run_dir / "metrics.jsonl")
    writer.log_many({"mini_batches_total": total, "mini_batches_done": len(done), "mini_batches_failed": len(failed),
                     "items_total": sum(b["items"] for b in queue.batches), "items_failed": counts["failed_items"],
                     "rows_returned": rows})
    logs = run_dir / "logs" / "user"
    logs.mkdir(parents=True, exist_ok=True)
    errors = [f"mini-batch {i} ({_what(queue.batches[i])}): " + " | ".join(queue.failed(i)["errors"]) for i in failed]
    atomic_write(logs / "error.txt", "".join(e + "\n" for e in errors))
    reason = queue.aborted() or thresholds.crossed()
    verdict = f"failed: {reason}" if reason else "succeeded"
    summary = (f"parallel job {verdict}: {len(done)} of {total} mini-batches done, {len(failed)} failed, "
               f"{counts['failed_items']} items failed, {rows} rows in {time.monotonic() - started:.1f} s")
    atomic_write(logs / "job_result.txt", summary + "\n")
    print(summary, flush=True)
    for line in errors[:5]:
        print(f"  {line}", flush=True)
    if reason:
        raise ParallelJobFailed(f"parallel job: {reason}"
                                + (f"; first: {errors[0]}" if errors else "") + " (logs/user/error.txt)")


def _launch() -> str:
    """What tells this launch of the run from an earlier one, the same in every rank: the rendezvous address
    (a new port for every launch), the Slurm job and its attempt."""
    keys = ("MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID", "MLTRAIN_ATTEMPT")
    return ":".join(os.environ.get(k, "") for k in keys)


def _expand(cfg: Any) -> None:
    """$VARS in the paths and arguments (a v2 job's outputs are $MLTRAIN_OUTPUTS_DIR/NAME), as a shell would,
    and the output folders made, as Azure mounts them before the entry script starts."""
    job = cfg.job
    job.input_data = os.path.expandvars(str(job.input_data))
    if job.get("append_row_to"):
        job.append_row_to = os.path.expandvars(str(job.append_row_to))
    job.program_arguments = [os.path.expandvars(str(a)) for a in job.program_arguments]
    for folder in job.get("output_dirs") or []:
        Path(os.path.expandvars(str(folder))).mkdir(parents=True, exist_ok=True)


def _what(batch: Dict[str, Any]) -> str:
    if "files" in batch:
        first = Path(batch["files"][0]).name
        return first if len(batch["files"]) == 1 else f"{first} and {len(batch['files']) - 1} more"
    if "partition" in batch:
        return ", ".join(f"{k}={v}" for k, v in batch["partition"].items())
    table = batch["table"]
    return f"{Path(table['file']).name} rows from byte {table['start']}"


def main() -> None:
    run_dir = Path(os.environ["MLTRAIN_RUN_DIR"])
    cfg = _config(run_dir / "config.yaml")
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    started = time.monotonic()
    _expand(cfg)
    queue = Queue(run_dir / "parallel", agent=f"{os.uname().nodename}:{os.getpid()}:{rank}", alone=world == 1)
    launch = _launch()
    if rank == 0 and queue.published():  # this run again: `runs resume`, a Slurm requeue
        done = queue.recover()
        print(f"parallel job resumed: {done} of {len(queue.batches)} mini-batches were done; the others run",
              flush=True)
    elif rank == 0:
        found = source(str(cfg.job.input_data), str(cfg.job.input_format))
        for note in found.notes:
            print(f"note: {note}", flush=True)
        size = mini_batch_size(cfg.job.mini_batch_size, found.tabular)
        batches = split(found, size, list(cfg.job.partition_keys), queue.root)
        queue.publish(batches)
        kind = "rows" if found.tabular else "files"
        print(f"parallel job: {sum(b['items'] for b in batches)} {kind} in {len(batches)} mini-batches, "
              f"{world} instance(s) x {cfg.job.max_concurrency_per_instance} worker(s)", flush=True)
    if rank == 0:
        queue.open_launch(launch)
    else:
        deadline = time.monotonic() + PUBLISH_WAIT_S
        while not queue.launch_open(launch):
            if time.monotonic() > deadline:
                raise ParallelJobFailed("parallel job: rank 0 never listed the mini-batches")
            time.sleep(0.2)
    thresholds = Thresholds(cfg, queue)
    progress = _Progress(queue, run_dir, rank)

    def after_batch(failure: bool) -> None:
        if failure:
            thresholds.check()
        progress.tick()

    agent = Agent(_settings(cfg, run_dir, rank), queue, on_event=after_batch)
    agent.run()  # returns once every mini-batch, the other nodes' too, is done or given up (or the job stopped)
    if rank != 0:
        return
    progress.tick(force=True)
    _finish(cfg, queue, run_dir, started)


class _Node(Dict[str, Any]):
    """A mapping of config.yaml read back, its keys also as attributes (`cfg.job.input_data`, as the frozen config
    reads). The file is the resolved config (no interpolation left): reading it with OmegaConf only cost its
    import, 0.1 s of each parallel job's start, where a command job has none."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value


def _config(path: Path) -> Any:
    def node(value: Any) -> Any:
        if isinstance(value, dict):
            return _Node({k: node(v) for k, v in value.items()})
        return [node(v) for v in value] if isinstance(value, list) else value

    return node(yaml.safe_load(path.read_text(encoding="utf-8")) or {})


class _Progress:
    """Rank 0's console line and progress metrics, at most every few seconds."""

    def __init__(self, queue: Queue, run_dir: Path, rank: int) -> None:
        self.queue, self.rank = queue, rank
        self.writer = MetricsWriter(run_dir / "metrics.jsonl")
        self.last = time.monotonic()
        self.step = 0

    def tick(self, force: bool = False) -> None:
        if self.rank != 0 or (not force and time.monotonic() - self.last < 5.0):
            return
        self.last = time.monotonic()
        done, failed = len(self.queue.names("done")), len(self.queue.names("failed"))
        total = len(self.queue.batches)
        self.writer.log_many({"progress/mini_batches_done": done, "progress/mini_batches_failed": failed},
                             step=self.step)
        self.step += 1
        print(f"parallel: {done}/{total} mini-batches done, {failed} failed", flush=True)


def _main() -> None:
    """As a component's rank ends (its one-line error, its exit code, no native teardown), without the process
    group a component joins: the agents meet in the run's folder, and never import torch."""
    code = 0
    try:
        main()
    except MltrainError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        code = exc.exit_code
    except SystemExit as exc:
        code = exit_code_of(exc)
    except Exception:  # noqa: BLE001 - reported as the interpreter would, then the rank's exit code 1
        traceback.print_exc()
        code = 1
    finish(code)


if __name__ == "__main__":
    _main()
