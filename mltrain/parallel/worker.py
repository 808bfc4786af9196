"""One worker process of a parallel job: the user's entry script's `init()` once, `run(mini_batch)` for each
mini-batch its agent (mltrain.parallel.program) hands it, `shutdown()` at the end.

Run by path with the job environment's interpreter (`python worker.py FD_IN FD_OUT`), as a user's
script is: that interpreter may have pandas and the user's packages but not mltrain, so this file imports
nothing of mltrain. The agent talks to it over two pipes (JSON lines), never over stdout, which is the
user's. A mini-batch's rows are written by the worker itself (`done/<index>.json` in the run's parallel
folder) and the agent is told how many items went in and how many rows came out.
"""
from __future__ import annotations

import importlib.util
import io
import json
import os
import sys
import time
import traceback
from typing import Any, Dict, List, Optional


class MiniBatchContext:
    """What Azure passes as `run(mini_batch, mini_batch_context)`: the partition a mini-batch is (partition_keys)."""

    def __init__(self, index: int, partition: Dict[str, Any]) -> None:
        self.minibatch_index = index
        self.partition_key_value = partition
        self.dataset = None


def load_entry_script(path: str) -> Any:
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)  # the script's own modules, as `python score.py` would find them
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def read_batch(batch: Dict[str, Any], root: str) -> Any:
    """The value `run` gets: a list of file paths, or a pandas DataFrame of the mini-batch's rows."""
    if "files" in batch:
        return list(batch["files"])
    # the job environment has pandas when its input is a table (Azure's runtime needs it too)
    import pandas as pd  # heavy

    table = batch["table"]
    if table["format"] == "pickle":  # a partition, written by the agent that split the table
        return pd.read_pickle(os.path.join(root, table["file"]))
    if table["format"] == "parquet":
        frame = pd.read_parquet(table["file"])
        return frame.iloc[table["start"]:table["end"]].reset_index(drop=True)
    with open(table["file"], "rb") as f:
        f.seek(table["start"])
        body = f.read(table["end"] - table["start"])
    header = table.get("header")
    text = (header.encode("utf-8") if header else b"") + body
    return pd.read_csv(io.BytesIO(text), sep=table["delimiter"], header=0 if header else None,
                       encoding=table.get("encoding") or "utf-8")


def rows_of(result: Any) -> List[str]:
    """append_row's lines: a DataFrame's rows (space-separated, no header or index, as Azure writes them),
    or one line per item of a list."""
    if result is None:
        return []
    if hasattr(result, "to_csv") and hasattr(result, "columns"):
        text = result.to_csv(sep=" ", header=False, index=False)
        return [line for line in text.splitlines() if line != ""]
    if isinstance(result, (str, bytes)):
        return [result.decode() if isinstance(result, bytes) else result]
    return [str(item) for item in result]


#: This worker's log of the mini-batches it ran (mltrain.parallel.work_queue reads it), opened at its first.
_log: Optional[int] = None


def write_done(root: str, index: int, rows: List[str], items: int) -> None:
    """Its rows, as one line appended to this worker's log in one write: a reader takes only whole lines, so a
    worker killed as it writes leaves the mini-batch not done. A file per mini-batch (made under a temporary
    name, then renamed) cost 0.2 ms of system time each on the build machine, more than a small mini-batch's
    scoring."""
    global _log
    if _log is None:
        name = f"{os.uname().nodename}.{os.getpid()}.{time.time_ns()}.jsonl"  # never an earlier launch's
        _log = os.open(os.path.join(root, "done", name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    data = (json.dumps({"index": index, "items": items, "rows": rows}) + "\n").encode("utf-8")
    while data:
        data = data[os.write(_log, data):]


def _parameters(run: Any) -> int:
    """How many parameters `run` takes, as len(inspect.signature(run).parameters) counts them: read off a plain
    function's code, where importing inspect (and ast with it) was 30 ms of each worker's start."""
    code = getattr(run, "__code__", None)
    plain = type(run).__name__ == "function" and not hasattr(run, "__wrapped__") and not hasattr(run, "__signature__")
    if plain and code is not None:  # a decorated one says its own signature (functools.wraps): inspect reads it
        return code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    import inspect  # startup

    return len(inspect.signature(run).parameters)


def main(fd_in: int, fd_out: int) -> int:
    inbox = os.fdopen(fd_in, "r", encoding="utf-8")
    outbox = os.fdopen(fd_out, "w", encoding="utf-8", buffering=1)

    def tell(**message: Any) -> None:
        outbox.write(json.dumps(message) + "\n")

    root, script = os.environ["MLTRAIN_PARALLEL_DIR"], os.environ["MLTRAIN_PARALLEL_ENTRY"]
    sys.argv = [script, *json.loads(os.environ.get("MLTRAIN_PARALLEL_ARGS", "[]"))]
    try:
        module = load_entry_script(script)
        if hasattr(module, "init"):
            module.init()
        run = module.run
        with_context = _parameters(run) >= 2
    except BaseException as exc:  # noqa: BLE001 - the agent reports it in one line and stops the job
        traceback.print_exc()
        tell(init_error=f"{type(exc).__name__}: {exc}")
        return 1
    tell(ready=True)
    for line in inbox:
        message = json.loads(line)
        if message.get("shutdown"):
            break
        index, batch = int(message["index"]), message["batch"]
        try:
            value = read_batch(batch, root)
            items = len(value)
            result = run(value, MiniBatchContext(index, batch.get("partition") or {})) if with_context else run(value)
            rows = rows_of(result)
            write_done(root, index, rows, items)
        except Exception as exc:  # noqa: BLE001 - the user's run() failed: the agent retries the mini-batch
            text = traceback.format_exc()
            print(f"mini-batch {index} failed:\n{text}", file=sys.stderr, flush=True)
            tell(error=index, message=f"{type(exc).__name__}: {exc}")
            continue
        sys.stdout.flush()
        tell(done=index, items=items, returned=len(rows))
    if hasattr(module, "shutdown"):
        try:
            module.shutdown()
        except Exception:  # noqa: BLE001 - the work is done and recorded; the error is the worker's log's
            traceback.print_exc()
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2])))
