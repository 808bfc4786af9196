"""A sweep or pipeline on a remote compute (issue 65): its own driver runs on the cluster, so the sampling, the early
termination and the steps' order go on when the laptop sleeps, loses the connection or is Ctrl-C'd.

    remote = target(composer, arguments, several)   # None: the command runs here
    run_there(request, composer, remote)             # sent, started there, followed (mltrain.backends.remote.multirun)

What goes over: mltrain and its venv (mltrain.backends.remote.shipping), the project (the files a snapshot of the
current folder takes, its `.mltrain` config folder and the request's other config folders; by content, so an
unchanged project sends nothing), and the request with this machine's paths made the cluster's. There the driver is
`python -m mltrain.cli.multirun REQUEST`, as for the Python API's detached sweeps, started detached from the
project's copy; a compute's `login` is ignored there (its members go to the Slurm beside it) and each run it makes is
listed (mltrain.runs.record.note_made) for this machine to mirror.
"""
from __future__ import annotations

import json
import os
import posixpath
import secrets
import sys
import tempfile
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Tuple

from omegaconf import OmegaConf

from mltrain.backends.remote import multirun, shipping
from mltrain.backends.remote.ssh import RemoteError
from mltrain.base.errors import MltrainError
from mltrain.jobspec.computes import ON_CLUSTER_ENV, remote_login
from mltrain.launch import multirun_files, snapshot
from mltrain.launch.composer import Composer
from mltrain.launch.request import Request, quote


def target(composer: Composer, arguments: Sequence[str], several: Callable[[], bool]) -> Optional[Any]:
    """The remote compute a command of several runs is sent to with its driver, or None (it runs here): a sweep on a
    remote compute (`several()`: more than one member), or a pipeline whose steps all run on one remote cluster
    (its own compute, or each step's `compute=NAME`). A pipeline with steps here and there keeps its driver here,
    and sends its remote steps one by one."""
    from mltrain import pipelines  # startup

    config = composer.config
    if os.environ.get(ON_CLUSTER_ENV) or OmegaConf.select(config, "dry_run", default=False):
        return None
    if not pipelines.wanted(config):
        return config.compute if remote_login(config.compute) and several() else None
    node = OmegaConf.select(config, "pipeline.steps", default=None)
    # as written: a step's overrides name its inputs (`${inputs.raw}`), which resolve only when the step is made
    steps = OmegaConf.to_container(node, resolve=False) if node is not None else {}
    chosen = {next((str(o).split("=", 1)[1] for o in (step or {}).get("overrides") or [] if str(o).startswith("compute=")),
                   None) for step in (steps.values() if isinstance(steps, dict) else [])}
    computes = [config.compute if choice is None else _compute(composer, arguments, choice)
                for choice in sorted(chosen, key=str)]
    logins = {remote_login(c) if c is not None else None for c in computes}
    return computes[0] if len(logins) == 1 and None not in logins else None


def _compute(composer: Composer, arguments: Sequence[str], choice: str) -> Optional[Any]:
    """A step's compute as the step composes it (the command's values, then the step's choice), or None where that
    cannot be composed (`compute.poll_s` given on the command line, a step on `compute=local`): such a step is not
    a remote one, and the pipeline's own path says what is wrong with it when it makes the step."""
    try:
        return composer.compose([*arguments, f"compute={choice}"]).compute
    except Exception:  # noqa: BLE001 - any refusal of the composition: reported where the step is made
        return None


def run_there(request: Request, composer: Composer, compute: Any) -> None:
    """Send the command to the cluster of `compute` (target's), start its driver there and follow it to its end (or
    until it has started, detached). Raises as run_app does: RunFailed, RunCanceled, MltrainError."""
    config = composer.config
    login, python = str(compute.login), str(compute.get("python") or "python3")
    detach = bool(OmegaConf.select(config, "run.detach", default=False))
    try:
        cluster = shipping.ready(shipping.connect(login, python, _driver_needs(config)))
        mirror = _send(request, config, cluster)
    except RemoteError as exc:
        raise MltrainError(f"submission to {login} failed: {exc}") from None
    print(f"sent to {login}: its driver runs there ({mirror.folder}); `mltrain runs cancel {mirror.name}` cancels it",
          flush=True)
    multirun.follow(mirror, detach)


#: The `sweep` extra (pyproject.toml), which a HyperDrive sweep's driver needs there: (pip name, module)
SWEEP_EXTRA = (("optuna", "optuna"), ("matplotlib", "matplotlib"))


def _driver_needs(config: Any) -> List[Tuple[str, str]]:
    """What the driver there needs beyond mltrain's own requirements: a HyperDrive sweep's `sweep` extra, at this
    machine's versions where it has them (the same sampler draws the same members)."""
    from mltrain import sweeps  # startup

    if not sweeps.wanted(config):
        return []
    needs = []
    for name, module in SWEEP_EXTRA:
        try:
            needs.append((f"{name}=={version(name)}", module))
        except PackageNotFoundError:
            needs.append((name, module))
    return needs


def _send(request: Request, config: Any, cluster: shipping.Cluster) -> multirun.Mirror:
    project = Path.cwd()
    runs_here = Path(str(config.run.root)).expanduser()
    sweep_here = Path(str(config.hydra.sweep.dir)).expanduser()
    runs_there = posixpath.join(cluster.home, "runs")
    entries, outside = _project_entries(project, request.config_dirs, runs_here)
    key = shipping.content_key(entries)
    project_there = posixpath.join(cluster.home, shipping.PROJECTS, key)
    pairs: List[Tuple[str, str]] = [(str(runs_here), runs_there), (str(project), project_there)]
    pairs += [(d, posixpath.join(project_there, rel)) for d, rel in outside]
    pairs += [(os.path.realpath(a), b) for a, b in pairs if os.path.realpath(a) != a]
    site = str(shipping.PACKAGE.parent)
    pairs += [(sys.executable, cluster.venv_python), (site, cluster.mltrain_dir)]
    sweep_there = shipping.remapped(json.dumps(str(sweep_here)), pairs)[1:-1]
    if sweep_there == str(sweep_here):  # a sweep folder outside the runs and the project: beside the runs there
        sweep_there = posixpath.join(runs_there, "_sweeps", sweep_here.name)
    pairs.append((str(sweep_here), sweep_there))
    name = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    folder = posixpath.join(cluster.home, shipping.MULTIRUNS, name)
    # the driver there follows the command to its end: a detached command detaches here
    overrides = [o for o in request.all_overrides() if not o.startswith("run.detach=")]
    overrides.append(f"hydra.sweep.dir={quote(sweep_there)}")
    with tempfile.TemporaryDirectory(prefix="mltrain-remote-") as tmp:
        made = multirun_files.write_request(Path(tmp), overrides, request.config_dirs, request.all_nodes())
        text = made.read_text(encoding="utf-8").replace(json.dumps(tmp)[1:-1], json.dumps(folder)[1:-1])
        made.write_text(shipping.remapped(text, pairs), encoding="utf-8")
        return multirun.start(cluster, entries, project_there, made, folder,
                              posixpath.join(folder, multirun_files.OUTCOME), sweep_here, sweep_there,
                              (str(runs_here), runs_there), pairs)


def _project_entries(project: Path, config_dirs: Sequence[str], runs_here: Path
                     ) -> Tuple[shipping.Entries, List[Tuple[str, str]]]:
    """The project as a snapshot of it takes it, its `.mltrain` folder, and the request's config folders outside it
    (each under `.mltrain-dirs/N`, with its path there)."""
    files, _ = snapshot.select_files(project, exclude=[str(runs_here)])
    entries: shipping.Entries = {}
    for rel in files:
        path = project / rel
        entries[rel] = {"link": os.readlink(path)} if path.is_symlink() else path
    if (project / ".mltrain").is_dir():
        entries.update(shipping.folder_entries(project / ".mltrain", ".mltrain"))
    outside: List[Tuple[str, str]] = []
    for i, folder in enumerate(config_dirs):
        real = os.path.realpath(folder)
        if real == str(project) or real.startswith(str(project) + os.sep) or not os.path.isdir(real):
            continue
        outside.append((folder, f".mltrain-dirs/{i}"))
        entries.update(shipping.folder_entries(Path(real), f".mltrain-dirs/{i}"))
    return entries, outside


