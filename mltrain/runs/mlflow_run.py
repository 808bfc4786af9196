"""The MLflow run each mltrain run gives its ranks, for scripts written for Azure ML v2 that log with
`mlflow.log_metric` / `log_param` / `autolog()`.

Each run gets its own small MLflow database (a copy of a template whose schema and one run already
exist), and its ranks get MLFLOW_TRACKING_URI and MLFLOW_RUN_ID pointing at that run: several ranks
write to one run and no rank migrates a schema. The template's run has a fixed id, so freezing a job
can name it without building anything (freezing stays free of side effects); the template itself is
made the first time a run is created that needs it, in a child process (the driver never imports
MLflow), with a progress line. mltrain.tracking.mirroring later folds what the ranks logged into the run's
metrics.jsonl and mirrors the run into the shared store.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional

from mltrain.base.atomic import atomic_write
from mltrain.base.home import mltrain_home, user_cache_dir
from mltrain.base.processes import pid_alive
from mltrain.runs import layer_site, script_store
from mltrain.runs.console import Console

SWITCH = "MLTRAIN_TRACKING"           # off: no mirror, no per-run database
RUN_DB = "mlflow.db"
#: The run's scripts' MLflow artifacts (mlflow.log_artifact, log_model) logged to its database.
ARTIFACTS = "artifacts"
#: The template run's id, the same in every run's database (MLflow accepts any id of word characters).
RUN_ID = "0" * 24 + "6d6c7472"
#: What mirrors runs into the shared store: a program the command waits for, never imported here.
MIRROR_PROGRAM = "mltrain.tracking.mirroring"


def enabled() -> bool:
    """Whether runs are tracked: MLflow is installed (looked up, not imported) and not switched off."""
    return os.environ.get(SWITCH, "on").lower() not in ("off", "0", "false") and \
        importlib.util.find_spec("mlflow") is not None


@functools.cache  # asked once per member of a sweep; reading package metadata is not free
def template_version() -> str:
    """The version of mltrain's MLflow, which makes the template: the only version that opens a run's
    database as it is (a job that brings another logs to a file store, mltrain.runs.script_store)."""
    try:
        return version("mlflow-skinny")
    except PackageNotFoundError:
        return version("mlflow")


def hook_environment(prefix: Path) -> bool:
    """Make a built environment's processes log to their run's file store when it has an MLflow of its own
    (another version than mltrain's cannot open the run's database: mltrain.runs.script_store says why):
    layer_site, run at each start of its interpreter, as in a job's package layer. Idempotent; True when
    the environment is hooked."""
    sites = list(prefix.glob("lib/python*/site-packages"))
    if not enabled() or len(sites) != 1:
        return False
    site = sites[0]
    own = layer_site.own_mlflow(str(site))
    if own is None or own == template_version():
        return False
    hook = site / "_mltrain_layer_site.pth"
    if not hook.is_file():
        atomic_write(prefix / layer_site.NOTE, json.dumps({
            "per_run": True, "run_db": RUN_DB, "mlflow": template_version(),
            "file_store_name": script_store.FILE_STORE, "experiment": script_store.EXPERIMENT}))
        atomic_write(site / "_mltrain_layer_site.py", Path(layer_site.__file__).read_text())
        atomic_write(hook, layer_site.SITE_HOOK)  # last: the hook runs only once the rest is in place
    return True


@functools.cache  # its path is fixed per process as it always was (tests clear it with XDG_CACHE_HOME)
def template_dir() -> Path:
    return user_cache_dir() / "mltrain" / f"mlflow-{template_version()}-fixed-id"


def rank_env(run_dir: str) -> Dict[str, str]:
    """MLflow variables for a run's ranks (pure: nothing is made here)."""
    if not enabled():
        return {}
    return {"MLFLOW_TRACKING_URI": f"sqlite:///{Path(run_dir) / RUN_DB}", "MLFLOW_RUN_ID": RUN_ID}


def logged_values(run_dir: str, key: str, seen: int) -> tuple[List[float], int]:
    """Values of one metric the ranks logged with mlflow.log_metric since the first `seen`, read while
    the run goes on (a sweep follows its primary metric here, as Azure's sweep follows the trial's
    MLflow run). Read-only SQLite, no MLflow import; a database being written is read next time. A job
    with an MLflow of its own logs to the run's file store instead (script_store): its values count too,
    in one order with the database's."""
    rows: List[tuple[int, int, float]] = [(stamp, step, value) for _, value, stamp, step
                                          in script_store.metric_rows(run_dir, RUN_ID, key)]
    db = Path(run_dir) / RUN_DB
    if db.is_file():
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.05)
            try:
                rows += con.execute("SELECT timestamp, step, value FROM metrics WHERE key = ?", (key,)).fetchall()
            finally:
                con.close()
        except sqlite3.Error:
            return [], seen
    new = [value for _, _, value in sorted(rows)[seen:]]
    return new, seen + len(new)


def seed_run_db(run_dir: Path, env: Dict[str, str]) -> None:
    """Copy the template database into a new run whose ranks were given MLflow's variables; the
    template is made first when this machine (and MLflow version) has none yet."""
    if env.get("MLFLOW_RUN_ID") != RUN_ID:
        return
    if not (template_dir() / "template.json").is_file() and not _prepare_template():
        return
    shutil.copyfile(template_dir() / "template.db", run_dir / RUN_DB)
    # The template's artifact locations are those of the folder it was made in (MLflow's ./mlruns, made
    # absolute): each run's own are its `artifacts/` folder, or every run's mlflow.log_artifact would land in
    # one folder of whichever project made the template.
    con = sqlite3.connect(run_dir / RUN_DB)
    try:
        with con:
            con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
                        (str(run_dir / ARTIFACTS),))
            con.execute("UPDATE runs SET artifact_uri = ? WHERE run_uuid = ?", (str(run_dir / ARTIFACTS), RUN_ID))
    finally:
        con.close()


def artifact_folders(run_dir: Path) -> List[Path]:
    """Where a run's scripts' MLflow artifacts are: its database's (`artifacts/`), then a file store's (a job
    with an MLflow of its own, mltrain.runs.script_store)."""
    return [run_dir / ARTIFACTS, script_store.run_folder(run_dir, RUN_ID) / "artifacts"]


def _prepare_template() -> bool:
    """Make the template in a child process; one status line, and a warning rather than a failed run
    if MLflow cannot make it."""
    console = Console()
    console.status("tracking: preparing MLflow's database for scripts that log with mlflow "
                   "(once per machine and MLflow version)")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", __name__, "--template"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or not (template_dir() / "template.json").is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        console.status(f"warning: tracking: MLflow could not make its database ({last}); scripts' mlflow "
                       "logging is not captured in this run")
        return False
    console.status(f"tracking: ready in {time.monotonic() - started:.1f}s")
    return True


class Mirror:
    """The mirror program (`python -m mltrain.tracking.mirroring`), started before the runs end so that its
    imports overlap them, and handed the run folders on its standard input when they have ended; it
    exits without writing if its input ends without them (the command died or handed it nothing). It
    is a program of its own because it belongs to a layer above this one, and it keeps MLflow's client,
    where the store needs it, out of the command's process."""

    def __init__(self) -> None:
        self.proc: Optional[subprocess.Popen[str]] = None
        if enabled():
            self.proc = subprocess.Popen([sys.executable, "-m", MIRROR_PROGRAM, "--stdin"], stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def run(self, run_dirs: Iterable[str]) -> None:
        """Mirror these runs into MLflow's store before this command returns (issue 39: no process of a
        command outlives it, and what it says has ended is in MLflow). A note under $MLTRAIN_HOME names
        the runs until the mirror has finished, so that a command killed meanwhile is finished by the
        next (catch_up)."""
        dirs = [str(d) for d in run_dirs]
        if self.proc is None or not dirs:
            self.close()
            return
        note = _pending_dir() / f"{os.getpid()}-{time.time_ns()}.json"
        atomic_write(note, json.dumps({"pid": os.getpid(), "runs": dirs}))
        _, err = self.proc.communicate("".join(d + "\n" for d in dirs) + "\n")
        console = Console()
        for line in err.splitlines():
            if line.startswith("mltrain: warning:"):  # a run MLflow refused: said, the others mirrored
                console.status(line[len("mltrain: "):])
        if self.proc.returncode == 0:
            note.unlink(missing_ok=True)
        else:
            last = (err.strip().splitlines() or [f"exit code {self.proc.returncode}"])[-1]
            console.status(f"warning: the MLflow mirror of {len(dirs)} run(s) did not finish ({last}); the next "
                           "`mltrain runs`, `models` or `ui` command retries it")

    def close(self) -> None:
        """Nothing to mirror: the program reads the end of its input and exits."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.communicate("")


@contextlib.contextmanager
def mirror_started(start: bool = True) -> Iterator[Optional[Mirror]]:
    """A Mirror started at the top of a command that follows its runs to their end (a run, a sweep, a pipeline),
    so that the mirror program's start-up overlaps the runs instead of following them; closed unused if
    the block raises. None when tracking is off or `start` is False (a detached command)."""
    mirror = Mirror() if start and enabled() else None
    try:
        yield mirror
    except BaseException:
        if mirror is not None:
            mirror.close()
        raise


def mirror_now(run_dirs: Iterable[str]) -> None:
    """Mirror these runs before this command returns (Mirror, started now)."""
    dirs = [str(d) for d in run_dirs]
    if dirs and enabled():
        Mirror().run(dirs)


def catch_up() -> None:
    """Finish the mirrors that a killed command left (its note names the runs, its process is gone)."""
    folder = _pending_dir(make=False)
    notes = sorted(folder.glob("*.json")) if folder.is_dir() else []
    dirs: List[str] = []
    left: List[Path] = []
    for note in notes:
        try:
            data = json.loads(note.read_text())
            # its command is still mirroring (a note of this process's own is one it left behind)
            if int(data["pid"]) != os.getpid() and pid_alive(int(data["pid"])):
                continue
            dirs += [str(d) for d in data["runs"]]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a note torn by the kill that cut its command short: its runs are for `runs sync`
        left.append(note)
    if dirs:
        mirror_now(dict.fromkeys(dirs))
    for note in left:
        note.unlink(missing_ok=True)


def _pending_dir(make: bool = True) -> Path:
    folder = mltrain_home() / "mirror-pending"
    if make:
        folder.mkdir(parents=True, exist_ok=True)
    return folder


def ensure_template() -> None:
    """A database with MLflow's schema and one run, copied into each new run (see rank_env). Built in a
    folder of its own and renamed into place whole, so processes racing to make it agree on one."""
    folder = template_dir()
    if (folder / "template.json").is_file():
        return
    from mlflow import MlflowClient  # heavy

    building = folder.with_name(f".{folder.name}-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    try:
        run = MlflowClient(tracking_uri=f"sqlite:///{building / 'template.db'}").create_run(
            "0", run_name="mltrain-run")
        # Copied into every run: MLflow's schema on 4 KB pages is 930 KB, on 1 KB pages about a quarter.
        con = sqlite3.connect(building / "template.db")
        try:
            con.execute("PRAGMA page_size=1024")
            con.execute("VACUUM")
        finally:
            con.close()
        # One fixed id in every run's copy, so freezing a job names it without reading the template.
        con = sqlite3.connect(building / "template.db")
        try:
            with con:
                for table in ("runs", "tags", "params", "metrics", "latest_metrics"):
                    con.execute(f"UPDATE {table} SET run_uuid = ? WHERE run_uuid = ?", (RUN_ID, run.info.run_id))
        finally:
            con.close()
        (building / "template.json").write_text(json.dumps({"run_id": RUN_ID}))
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
        os.rename(building, folder)
    except OSError:  # another process put its template there first: use that one
        if not (folder / "template.json").is_file():
            raise
    finally:
        shutil.rmtree(building, ignore_errors=True)



def main(argv: Optional[List[str]] = None) -> int:
    import logging  # startup

    logging.disable(logging.CRITICAL)
    if (argv if argv is not None else sys.argv[1:]) == ["--template"]:
        ensure_template()
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
