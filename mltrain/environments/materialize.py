"""Turning a spec into the interpreter the ranks run.

- user-managed (the default for `environment=current`): the given interpreter (else this one); the
  spec's Python packages are checked against what it has installed before any rank starts.
- otherwise: a virtual environment built once from the spec's pip packages under
  $MLTRAIN_HOME/envs/<cache key>/, reused by later runs. A lock makes concurrent runs build it
  once; the `.ready` marker is written last, so a failed build is never taken as usable. The venv
  sees this interpreter's packages after its own (a .pth file), so mltrain itself and torch stay
  importable in the ranks while the spec's pins win.
- with a docker base image on a cluster the image is the environment: nothing is built here.
"""
from __future__ import annotations

import fcntl
import json
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from packaging.requirements import InvalidRequirement, Requirement

from mltrain.base.errors import ConfigError, MltrainError
from mltrain.base.home import mltrain_home
from mltrain.base.processes import stop_group, within
from mltrain.environments import nearest_pins, parent_fit
from mltrain.environments.catalog import CURATED, TORCH_MAX_PYTHON
from mltrain.environments.spec import EnvironmentSpec, current_python

READY = ".ready"
LIST_PACKAGES = ("import importlib.metadata as m, json; "
                 "print(json.dumps(sorted({d.metadata['Name'] + '==' + d.version for d in m.distributions() "
                 "if d.metadata['Name']})))")


def env_dir(spec: EnvironmentSpec) -> Path:
    return mltrain_home() / "envs" / spec.cache_key()


def interpreter_for(spec: EnvironmentSpec, containerized: bool) -> str:
    if containerized:
        return "python"  # the image's own Python
    if spec.user_managed:
        return spec.interpreter or sys.executable
    return str(env_dir(spec) / "bin" / "python")


def _minor(version: str) -> Tuple[int, int]:
    major, minor = (version.split(".") + ["0"])[:2]
    return int(major), int(minor)


def check_buildable(spec: EnvironmentSpec) -> None:
    """Fail fast, before a long build, when the spec's pins cannot exist on this Python, or when its conda
    packages include one that PyPI does not have (the job would fail at import)."""
    missing = spec.conda_only_packages()
    if missing:
        raise ConfigError("environment.conda", f"{spec.name}: {', '.join(missing)} "
                          f"{'is a conda package' if len(missing) == 1 else 'are conda packages'} with no PyPI "
                          "equivalent, and a built environment is a virtual environment of PyPI packages: drop "
                          f"{'it' if len(missing) == 1 else 'them'}, or run the environment's docker image on Slurm "
                          "(docker.base_image, compute=slurm)")
    here = _minor(current_python())
    if spec.python_version and _minor(spec.python_version) != here:
        torch = next((p.split("==")[1] for p in spec.python_packages() if p.startswith("torch==")), None)
        why = ""
        if torch:
            series = ".".join(torch.split(".")[:2])
            newest = TORCH_MAX_PYTHON.get(series)
            if newest and _minor(newest) < here:
                why = f"; torch=={torch} has no build for Python {here[0]}.{here[1]} (newest: {newest})"
        raise ConfigError(
            "environment", f"{spec.name} pins Python {spec.python_version} but this machine runs Python "
            f"{current_python()} and mltrain builds environments with it{why}. Use it on a cluster through its "
            "docker image (compute=slurm), or environment=current / a custom environment")


def check_user_managed(spec: EnvironmentSpec, mode: str = "error") -> List[str]:
    """Mismatches between the spec's Python packages and what the interpreter has installed."""
    wanted = spec.installable_packages()
    if not wanted:
        return []
    installed = dict(p.split("==", 1) for p in installed_packages(interpreter_for(spec, False)))
    lowered = {k.lower().replace("_", "-"): v for k, v in installed.items()}
    problems = []
    for line in wanted:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            problems.append(f"{line} (not a valid requirement)")
            continue
        have = lowered.get(req.name.lower().replace("_", "-"))
        if have is None:
            problems.append(f"{line} (not installed)")
        elif req.specifier and not req.specifier.contains(have, prereleases=True):
            problems.append(f"{line} (installed: {have})")
    if problems and mode == "error":
        raise ConfigError("environment", f"{spec.name} is user-managed and its interpreter does not satisfy: "
                          + "; ".join(problems) + " (set environment.check=warn to run anyway)")
    return problems


def installed_packages(interpreter: str) -> List[str]:
    """`pip freeze`, read through importlib.metadata (far faster than starting pip)."""
    out = subprocess.run([interpreter, "-c", LIST_PACKAGES], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise MltrainError(f"cannot list the packages of {interpreter}: {out.stderr.strip()[-300:]}")
    return json.loads(out.stdout)


#: Builds that failed in this process (a sweep's or pipeline's driver prepares every member's environment):
#: the same spec is not built again for each member (minutes of pip per trial), its error is repeated.
_failed: Dict[str, str] = {}


class BuildStopped(MltrainError):
    """The build was stopped because its run was canceled: not a failure of the spec (never repeated to
    later members as one)."""


def build(spec: EnvironmentSpec, log: Callable[[str], None],
          stop: Optional[threading.Event] = None) -> Tuple[Path, bool]:
    """(environment folder, whether this call built it). Safe when several runs ask at once. `stop` set
    (the run canceled) ends the build's pip at once and raises BuildStopped."""
    target = env_dir(spec)
    if (target / READY).is_file():
        return target, False
    if spec.cache_key() in _failed:
        raise MltrainError(f"{_failed[spec.cache_key()]} (the build failed for an earlier run of this command; "
                           "not tried again)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / READY).is_file():  # another run built it while this one waited
            return target, False
        shutil.rmtree(target, ignore_errors=True)  # a failed build's leftovers
        start = time.perf_counter()
        log(f"building environment {spec.name} ({spec.cache_key()}) in {target}")
        for note in build_notes(spec):
            log(f"environment {spec.name}: {note}")
        try:
            _build_into(spec, target, stop, log)
        except BuildStopped:
            shutil.rmtree(target, ignore_errors=True)
            raise
        except MltrainError as exc:
            shutil.rmtree(target, ignore_errors=True)
            _failed[spec.cache_key()] = str(exc)
            raise
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        (target / READY).write_text(json.dumps({"name": spec.name, "built": time.time(),
                                                "seconds": time.perf_counter() - start}))
        log(f"environment built in {time.perf_counter() - start:.1f}s")
        return target, True


def _run_stoppable(cmd: List[str], stop: Optional[threading.Event]) -> subprocess.CompletedProcess:
    """`cmd` to its end, or until `stop` is set: a canceled run does not wait minutes for pip. The command
    runs in a process group of its own, stopped whole: `pip --python ENV` runs a second pip under the
    environment's interpreter, which would keep the output pipes open after the first one ended."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    while True:
        try:
            out, err = proc.communicate(timeout=0.2)
            return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            if stop is not None and stop.is_set():
                stop_group(proc.pid, ((signal.SIGTERM, 5.0), (signal.SIGKILL, None)),
                           within(lambda grace: proc.communicate(timeout=grace)))
                raise BuildStopped("the environment build was stopped") from None


def _build_into(spec: EnvironmentSpec, target: Path, stop: Optional[threading.Event] = None,
                log: Callable[[str], None] = lambda line: None) -> None:
    def run(cmd: List[str]) -> subprocess.CompletedProcess:
        return _run_stoppable(cmd, stop)

    made = run([sys.executable, "-m", "venv", "--without-pip", str(target)])
    if made.returncode != 0:
        raise MltrainError(f"could not create a virtual environment: {made.stderr.strip()[-500:]}")
    site = Path(run([str(target / "bin" / "python"), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
                .stdout.strip())
    # This interpreter's packages come after the environment's own (mltrain and torch stay importable).
    (site / "_mltrain_parent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n" + _distutils_line(spec))
    packages = spec.installable_packages()
    if not packages:
        return

    def install(wanted: List[str]) -> subprocess.CompletedProcess:
        return run([sys.executable, "-m", "pip", "--python", str(target / "bin" / "python"), "install",
                    "--no-input", "--disable-pip-version-check", "-q", *wanted])

    recorded = nearest_pins.bounds(packages)
    if recorded:
        log(f"environment {spec.name}: unpinned packages whose newest releases do not import beside the others "
            "bounded: " + ", ".join(f"{a} -> {b}" for a, b in recorded.items()))
        packages = [recorded.get(p, p) for p in packages]
    pip = install(packages)
    if pip.returncode != 0:
        # pins written for another Python (Azure's image): the nearest releases with a wheel for this one
        moved = nearest_pins.moves(packages, current_python().rsplit(".", 1)[0])
        if moved:
            log(f"environment {spec.name}: pins with no wheel for Python {current_python().rsplit('.', 1)[0]} moved "
                "to the nearest release that has one: " + ", ".join(f"{a} -> {b}" for a, b in moved.items()))
            packages = [moved.get(p, p) for p in packages]
            pip = install(packages)
            recorded.update(moved)
    if pip.returncode == 0 and recorded:
        (target / nearest_pins.MOVED_FILE).write_text(json.dumps(recorded, indent=1))
    if pip.returncode != 0:
        tail = (pip.stderr or pip.stdout).strip().splitlines()[-3:]
        raise MltrainError(f"building environment {spec.name} failed: pip install {' '.join(packages)}: "
                           + " | ".join(tail))
    given = parent_fit.fit(str(target / "bin" / "python"), site, lambda wanted: install(list(wanted)), log, spec.name)
    if given:
        (target / parent_fit.FIT_FILE).write_text(json.dumps(given, indent=1))


#: Read by setuptools' distutils-precedence.pth, which comes after `_mltrain_parent.pth` (.pth files are read by name).
STDLIB_DISTUTILS = 'import os; os.environ.setdefault("SETUPTOOLS_USE_DISTUTILS", "stdlib")\n'


def _distutils_line(spec: EnvironmentSpec) -> str:
    """A conda file's environment gets setuptools (spec.CONDA_SETUPTOOLS), whose distutils shim (local, the
    default since setuptools 60) is dropped for the standard library's as soon as pip is imported (before
    Python 3.12). A module taken from the shim before then and used after mixes the two: mlflow 2.3.2's
    `distutils.dir_util.copy_tree` (log_model, after its requirement inference imports pip) fails on
    `distutils._modified`, which only the shim has (Azure's scikit-learn HyperDrive notebook). Its processes
    use the standard library's distutils from the start, as setuptools did before 60; the user's own
    setting wins. Python 3.12 has no distutils of its own: nothing to choose."""
    return STDLIB_DISTUTILS if spec.conda and sys.version_info < (3, 12) else ""


def materialize(spec: EnvironmentSpec, containerized: bool, check_mode: str,
                log: Callable[[str], None], stop: Optional[threading.Event] = None) -> dict:
    """Make the spec's interpreter ready; returns what run.json records about it. `stop`: see build()."""
    info = {"spec": spec.to_json(), "cache_key": spec.cache_key(), "interpreter": interpreter_for(spec, containerized)}
    if containerized:
        info["materialized"] = "docker image (on the cluster)"
        return info
    if spec.user_managed:
        problems = check_user_managed(spec, check_mode)
        info["materialized"] = "user-managed"
        if problems:
            info["mismatches"] = problems
            log("warning: environment mismatches: " + "; ".join(problems))
        return info
    _, built = build(spec, log, stop)
    info["materialized"] = "built" if built else "reused"
    moved = {**moved_pins(spec), **_moved_when_built(spec)}
    if moved:
        info["moved_pins"] = moved
    if spec.conda_from_pypi():
        info["conda_from_pypi"] = dict(spec.conda_from_pypi())
    try:
        info["parent_fit"] = json.loads((env_dir(spec) / parent_fit.FIT_FILE).read_text())
    except (OSError, ValueError):
        pass
    return info


def moved_pins(spec: EnvironmentSpec) -> Dict[str, str]:
    """A curated environment's pins moved from Azure's (no wheel on this Python) -> the ones installed."""
    entry = CURATED.get(spec.name) or {}
    return dict(entry.get("moved") or {}) if spec.conda == entry.get("conda") else {}


def _moved_when_built(spec: EnvironmentSpec) -> Dict[str, str]:
    """The pins its build moved for want of a wheel and the unpinned packages it bounded (nearest_pins), as the
    environment recorded them."""
    try:
        return dict(json.loads((env_dir(spec) / nearest_pins.MOVED_FILE).read_text()))
    except (OSError, ValueError):
        return {}


def build_notes(spec: EnvironmentSpec) -> List[str]:
    """What a build says once: pins moved from Azure's, conda packages installed from PyPI."""
    notes = []
    moved = moved_pins(spec)
    if moved:
        python = (CURATED.get(spec.name) or {}).get("azure_python")
        notes.append(f"Azure's pins with no wheel for Python {current_python().rsplit('.', 1)[0]} (Azure's image has "
                     f"Python {python}) or that no longer import beside its others moved to the nearest release "
                     "that installs: "
                     + ", ".join(f"{old} -> {new}" for old, new in moved.items()))
    renamed = [f"{c} -> {p}" for c, p in spec.conda_from_pypi() if c != p]
    same = [c for c, p in spec.conda_from_pypi() if c == p]
    if renamed or same:
        notes.append("conda packages installed from PyPI, same versions: " + ", ".join(same + renamed))
    return notes


_listed: dict = {}
_listing_lock = threading.Lock()


def record_packages(interpreter: str) -> Optional[List[str]]:
    """The interpreter's packages for run.json, listed once per driver process: every member of a
    sweep runs with the same interpreter, and a listing is a Python process of its own."""
    with _listing_lock:
        if interpreter not in _listed:
            try:
                _listed[interpreter] = installed_packages(interpreter)
            except (MltrainError, OSError, subprocess.TimeoutExpired):
                return None
        return list(_listed[interpreter])
