"""Environments: the curated catalog, custom specs, cached virtual environments, container flags."""
from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from packaging.version import Version
from support import leftovers, mltrain_exe, only_run, run_mltrain, runs

from mltrain.base.errors import ConfigError
from mltrain.environments import CURATED, from_config, load

SIX = ["job=script", "job.script=six_check.py", "environment.name=six-env", "environment.python.user_managed=false",
       'environment.pip=["six==1.16.0"]']


PYTORCH = sorted(n for n in CURATED if n.lower().startswith("azureml-pytorch"))
#: Azure's curated v2 families (scikit-learn, LightGBM, TensorFlow, ACPT): packages on an Azure base image.
V2 = sorted(set(CURATED) - set(PYTORCH))


@pytest.mark.parametrize("name", V2)
def test_curated_v2_environments_are_their_packages_without_azures_clients(name, tmp_path):
    spec = from_config({"name": name})
    assert spec.curated and not spec.user_managed and spec.base_image is None  # built on the host, any compute
    if "mldesigner" not in name:  # Azure's mldesigner environments list mldesigner (and azure-ai-ml), no azureml-core
        assert "azureml-core" in spec.python_packages() and "azureml-mlflow" in spec.python_packages()
    assert not [p for p in spec.installable_packages() if p.startswith("azureml-")]  # mltrain provides them
    assert load(spec.save(tmp_path / "saved")) == spec


@pytest.mark.parametrize("name", PYTORCH)
def test_every_curated_name_resolves_and_round_trips(name, tmp_path):
    spec = from_config({"name": name, "python": {"user_managed": False}})
    assert spec.curated and spec.python_version and spec.base_image.startswith("mcr.microsoft.com/azureml/")
    assert any(p.startswith("torch==") for p in spec.python_packages())
    assert any(p.startswith("torchvision==") for p in spec.python_packages())
    assert any(p.startswith(("horovod==", "horovod[pytorch]==")) for p in spec.python_packages())
    assert load(spec.save(tmp_path / "saved")) == spec


def test_seed_pins_of_pytorch_16_gpu():
    spec = from_config({"name": "AzureML-PyTorch-1.6-GPU"})
    packages = spec.python_packages()
    assert "torch==1.6.0" in packages and "horovod==0.19.1" in packages
    assert "torchvision==0.5.0" in packages  # Azure's own (inconsistent) pin, kept as published
    assert spec.python_version == "3.6.2"
    assert spec.base_image == "mcr.microsoft.com/azureml/openmpi3.1.2-cuda10.1-cudnn7-ubuntu18.04"


def test_clone_reserved_prefix_and_conda_file(tmp_path):
    spec = from_config({"name": "AzureML-PyTorch-1.6-GPU"})
    mine = spec.clone("pytorch-1.6-gpu")
    assert mine.name == "pytorch-1.6-gpu" and mine.python_packages() == spec.python_packages()
    with pytest.raises(ConfigError, match="reserved for curated environments"):
        spec.clone("AzureML-mine")
    conda = tmp_path / "conda_dependencies.yml"  # seed 001's file
    conda.write_text("channels:\n- conda-forge\ndependencies:\n- python=3.6.2\n- pip:\n  - azureml-defaults\n"
                     "  - torch==1.6.0\n  - torchvision==0.7.0\n  - future==0.17.1\n  - pillow\n")
    custom = from_config({"name": "pytorch-1.6-gpu", "conda": str(conda),
                          "docker": {"base_image": "mcr.microsoft.com/azureml/openmpi3.1.2-cuda10.1-cudnn7-ubuntu18.04"}})
    assert custom.python_version == "3.6.2" and "torchvision==0.7.0" in custom.python_packages()
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("six==1.16.0  # pinned\n\nattrs\n")
    assert from_config({"name": "r", "pip": str(reqs)}).pip == ["six==1.16.0", "attrs"]


def test_env_commands(home, project, tmp_path):
    listed = run_mltrain("env", "list", cwd=project)
    assert listed.rc == 0 and "AzureML-PyTorch-1.6-GPU   (curated)" in listed.out and "current" in listed.out
    shown = run_mltrain("env", "show", "AzureML-pytorch-1.10-ubuntu18.04-py38-cuda11-gpu", cwd=project)
    assert '"python_version": "3.8"' in shown.out and "torch==1.10.0" in shown.out
    saved = run_mltrain("env", "save", "AzureML-PyTorch-1.6-GPU", str(tmp_path / "out"), cwd=project)
    assert saved.rc == 0 and (tmp_path / "out" / "conda_dependencies.yml").is_file()
    assert load(tmp_path / "out") == from_config({"name": "AzureML-PyTorch-1.6-GPU"})
    unknown = run_mltrain("env", "show", "AzureML-PyTorch-1.6-GPX", cwd=project)
    assert unknown.rc != 0 and "closest: AzureML-PyTorch-1.6-GPU" in unknown.err


def test_unknown_curated_name_lists_close_matches(home, project):
    r = run_mltrain("job=script", "job.script=show_env.py", "environment=AzureML-PyTorch-1.6-GPUX", cwd=project)
    assert r.rc != 0 and len(r.err.strip().splitlines()) == 1
    assert "closest: AzureML-PyTorch-1.6-GPU" in r.err


def test_reserved_prefix_refused_for_custom_names(home, project):
    r = run_mltrain("job=script", "job.script=show_env.py", "environment.name=AzureML-mine", cwd=project)
    assert r.rc != 0 and "'AzureML' prefix is reserved" in r.err and leftovers(home) == []


def test_curated_pins_impossible_here_fail_fast(home, project):
    r = run_mltrain("job=script", "job.script=show_env.py", "environment=AzureML-PyTorch-1.6-GPU", cwd=project)
    assert r.rc != 0 and "torch==1.6.0 has no build for Python" in r.err
    assert leftovers(home) == [] and not (home / "envs").exists()  # nothing was built


@pytest.mark.slow
def test_user_managed_unsatisfiable_pin_fails_before_any_rank(home, project):
    r = run_mltrain("job=script", "job.script=show_env.py", 'environment.pip=["hydra-core==0.0.1", "not-a-real-pkg-xyz"]',
                    cwd=project)
    assert r.rc != 0 and len(r.err.strip().splitlines()) == 1
    assert "hydra-core==0.0.1 (installed: 1." in r.err and "not-a-real-pkg-xyz (not installed)" in r.err
    assert leftovers(home) == []
    warned = run_mltrain("job=script", "job.script=show_env.py", 'environment.pip=["hydra-core==0.0.1"]',
                         "environment.check=warn", cwd=project)
    assert warned.rc == 0 and "warning: environment mismatches" in warned.out


@pytest.mark.slow
def test_built_environment_is_cached_and_reused(home, project):
    first = run_mltrain(*SIX, cwd=project, timeout=300)
    assert first.rc == 0, first.out + first.err
    assert "building environment six-env" in first.out
    # job=command finds the environment's python first on PATH, as in an activated venv
    command = 'job.command="python -c \'import six, sys; print(sys.executable, six.__version__)\'"'
    second = run_mltrain("job=command", command, *SIX[2:], cwd=project, timeout=300)
    assert second.rc == 0 and "building environment" not in second.out, second.out + second.err
    a, b = runs(home)
    assert a["environment"]["materialized"] == "built" and b["environment"]["materialized"] == "reused"
    assert a["environment"]["cache_key"] == b["environment"]["cache_key"]
    exe = a["environment"]["interpreter"]
    assert exe.startswith(str(home / "envs")) and f"exe {exe} six 1.16.0" in first.out
    assert f"{exe} 1.16.0" in second.out
    assert "six==1.16.0" in b["environment"]["packages"]  # the exact packages that ran


@pytest.mark.slow
def test_concurrent_runs_build_the_environment_once(home, project):
    spec = SIX[:-1] + ['environment.pip=["six==1.15.0"]']
    drivers = [subprocess.Popen(mltrain_exe() + spec, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(2)]
    outs = [d.communicate(timeout=300) for d in drivers]
    assert [d.returncode for d in drivers] == [0, 0], outs
    kinds = sorted(r["environment"]["materialized"] for r in runs(home))
    assert kinds == ["built", "reused"]
    assert sum(o[0].count("building environment") for o in outs) == 1


@pytest.mark.slow
def test_failed_build_is_not_marked_usable(home, project):
    bad = SIX[:-1] + ['environment.pip=["mltrain-no-such-package-xyz==9.9"]']
    r = run_mltrain(*bad, cwd=project, timeout=300)
    assert r.rc != 0 and "building environment six-env failed" in r.out + r.err
    assert only_run(home)["status"] == "Failed"
    env_dirs = [p for p in (home / "envs").iterdir() if p.is_dir()]
    assert all(not (p / ".ready").exists() for p in env_dirs)


@pytest.mark.slow
def test_a_sweep_builds_a_failing_environment_once_and_every_member_says_why(home, project):
    bad = SIX[:-1] + ['environment.pip=["mltrain-no-such-package-xyz==9.9"]', "+job.params.i=1,2,3"]
    r = run_mltrain("-m", *bad, cwd=project, timeout=300)
    assert r.rc != 0
    out = r.out + r.err
    assert out.count("building environment six-env (") == 1, out[-3000:]  # not once per member
    members = runs(home)
    assert len(members) == 3 and all(m["status"] == "Failed" for m in members)
    assert sum("not tried again" in (m.get("error") or "") for m in members) == 2
    assert all("mltrain-no-such-package-xyz" in (m.get("error") or "") for m in members)


class _Stalls(http.server.BaseHTTPRequestHandler):
    """A package index that never answers in time: the build's pip waits on it."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        time.sleep(120)

    def log_message(self, *args) -> None:
        pass


@pytest.mark.slow
def test_a_run_canceled_while_its_environment_builds_ends_canceled_at_once(home, project):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stalls)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/stalls-0.1-py3-none-any.whl"
    spec = SIX[:-1] + [f'environment.pip=["stalls @ {url}"]']
    driver = subprocess.Popen(mltrain_exe() + spec, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True)
    try:
        lines = []
        for line in driver.stdout:  # until pip is under way
            lines.append(line)
            if "building environment six-env" in line:
                break
        time.sleep(1.0)
        stopped = time.monotonic()
        driver.send_signal(signal.SIGTERM)  # what `mltrain runs cancel` sends the driver
        out = "".join(lines) + driver.communicate(timeout=60)[0]
        took = time.monotonic() - stopped
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        server.shutdown()
    assert driver.returncode != 0 and took < 15, (took, out)  # pip would have waited 120 s on the index
    run = only_run(home)
    assert run["status"] == "Canceled" and "while preparing" in run["error"], run
    assert all(not (p / ".ready").exists() for p in (home / "envs").iterdir() if p.is_dir())  # nothing half-made


def test_slurm_dry_run_with_curated_gpu_environment_shows_container_and_setup(home, project):
    base = ["--dry-run", "job=script", "job.script=show_env.py", "compute=slurm", "compute.gpus_per_node=1",
            "environment=AzureML-PyTorch-1.6-GPU", "+environment.setup=[module load cuda/10.1]",
            "+environment.environment_variables.NCCL_DEBUG=INFO"]
    r = run_mltrain(*base, cwd=project)
    assert r.rc == 0, r.err
    assert "--container-image=mcr.microsoft.com/azureml/openmpi3.1.2-cuda10.1-cudnn7-ubuntu18.04" in r.out
    assert "\n    module load cuda/10.1\n" in r.out and "NCCL_DEBUG=INFO" in r.out
    r = run_mltrain(*base, "compute.container_runtime=apptainer", cwd=project)
    assert r.rc == 0 and "'apptainer', 'exec', '--nv'" in r.out
    assert "docker://mcr.microsoft.com/azureml/openmpi3.1.2-cuda10.1-cudnn7-ubuntu18.04" in r.out


def test_azure_sdk_packages_are_never_installed_the_stand_ins_answer_for_them():
    # Azure's HyperDriveStep notebook asks for `azureml-sdk` in its register step's environment: installed, its
    # real azureml.core would shadow the stand-in and Run.get_context() would have no experiment
    spec = from_config({"name": "register", "conda": {"dependencies": [
        "python=3.11", {"pip": ["azureml-sdk", "azureml-pipeline-core==1.62.0", "azureml-widgets", "pandas",
                                "azureml-opendatasets"]}]}})
    assert spec.installable_packages() == ["pandas", "azureml-opendatasets", "setuptools<81"]


def test_a_conda_file_environment_has_pkg_resources_as_a_conda_environment_does(home, project):
    # conda's pip brings setuptools: Azure's environments from conda files have pkg_resources, which older
    # packages import (mldesigner 0.1.0b17, in Azure's notebook 1b); a venv on this interpreter had none
    (project / "uses_pkg_resources.py").write_text("import pkg_resources\nprint('PKG', pkg_resources.__name__)\n")
    r = run_mltrain("job=script", "job.script=uses_pkg_resources.py", "environment.name=old-packages",
                    "environment.python.user_managed=false",
                    "environment.conda={dependencies:['python=3.11',pip,{pip:['six==1.16.0']}]}", cwd=project, timeout=300)
    assert r.rc == 0, r.out + r.err
    assert "PKG pkg_resources" in (Path(runs(home)[-1]["dir"]) / "logs" / "rank_0.log").read_text()
    mine = from_config({"name": "mine", "conda": {"dependencies": ["python=3.11", {"pip": ["setuptools==80.9.0"]}]}})
    assert mine.installable_packages() == ["setuptools==80.9.0"]  # a conda file's own setuptools is kept


def _needs_pypi(project_name: str, version: str = "") -> None:
    """Skip where pip's index cannot be reached here (or does not serve `version` of the project)."""
    found = subprocess.run([sys.executable, "-m", "pip", "index", "versions", project_name], capture_output=True,
                           text=True, timeout=60)
    if found.returncode != 0 or (version and f" {version}," not in found.stdout):
        pytest.skip(f"pip's index does not serve {project_name} {version} here (no network?)".replace("  ", " "))


def _in_built_environment(home, project, script: str, name: str, pip: str, timeout: float = 900):
    """`script` run in a built environment of one conda file with `pip` in its pip section: (the command's
    result, its run, rank 0's log)."""
    r = run_mltrain("job=script", f"job.script={script}", f"environment.name={name}",
                    "environment.python.user_managed=false",
                    f"environment.conda={{dependencies:[{{pip:['{pip}']}}]}}", cwd=project, timeout=timeout)
    run = runs(home)[-1]
    rank_log = Path(run["dir"]) / "logs" / "rank_0.log"
    return r, run, rank_log.read_text() if rank_log.is_file() else ""


@pytest.mark.slow
@pytest.mark.network
def test_pins_with_no_wheel_for_this_python_move_to_the_nearest_release_that_has_one(home, project):
    # Azure's scikit-learn HyperDrive notebook pins what its image's Python 3.8 installs: scikit-learn 0.24.2 and
    # scipy 1.7.1 have no wheel for this Python, and pip's build of them from source fails (its python=3.8 is the
    # image's: the v2 environment here has an Azure image, whose Python is not this one's to pin)
    found = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "scipy"], capture_output=True, text=True,
                           timeout=60)
    if found.returncode != 0:
        pytest.skip("pip's index cannot be reached here")
    # Its unpinned scikit-learn-intelex (conda's package; PyPI's of the same name) is the notebook's trial's first
    # import: its newest release (2026.2) asks for scikit-learn >= 1.0 but imports what only 1.2 and later have
    (project / "sk.py").write_text("from sklearnex import patch_sklearn\npatch_sklearn()\nimport sklearnex, sklearn, scipy\n"
                                   "print('VERSIONS', sklearn.__version__, scipy.__version__)\n"
                                   "from importlib.metadata import version\n"
                                   "print('SKLEARNEX', version('scikit-learn-intelex'))\n")
    r = run_mltrain("job=script", "job.script=sk.py", "environment.name=sklearn-env",
                    "environment.python.user_managed=false",
                    "environment.conda={dependencies:['scikit-learn=0.24.2','scikit-learn-intelex','scipy=1.7.1',"
                    "{pip:[six]}]}",
                    cwd=project, timeout=900)
    assert r.rc == 0, r.out + r.err
    run = runs(home)[-1]
    launcher = (Path(run["dir"]) / "logs" / "launcher.log").read_text()
    assert ("unpinned packages whose newest releases do not import beside the others bounded: "
            "scikit-learn-intelex -> scikit-learn-intelex<2026.2") in launcher, launcher
    assert ("pins with no wheel for Python 3.11 moved to the nearest release that has one: "
            "scikit-learn==0.24.2.* -> scikit-learn==1.1.3, scipy==1.7.1.* -> scipy==1.9.2") in launcher, launcher
    rank = (Path(run["dir"]) / "logs" / "rank_0.log").read_text()
    assert "VERSIONS 1.1.3 1.9.2" in rank, rank
    assert "Extension for Scikit-learn* enabled" in rank, rank  # patch_sklearn()'s own line
    assert Version(rank.split("SKLEARNEX ")[1].split()[0]) < Version("2026.2"), rank
    recorded = json.loads((Path(run["dir"]) / "run.json").read_text())["environment"]["moved_pins"]
    assert recorded == {"scikit-learn==0.24.2.*": "scikit-learn==1.1.3", "scipy==1.7.1.*": "scipy==1.9.2",
                        "scikit-learn-intelex": "scikit-learn-intelex<2026.2"}


def test_an_unpinned_package_is_bounded_only_beside_an_older_release_than_its_newest_imports_with():
    from mltrain.environments import nearest_pins

    def bounded(*packages):
        return nearest_pins.bounds(list(packages))

    sklearnex = {"scikit-learn-intelex": "scikit-learn-intelex<2026.2"}
    assert bounded("scikit-learn==0.24.2.*", "scikit-learn-intelex", "scipy==1.7.1.*") == sklearnex
    assert bounded("scikit-learn~=1.5.0", "scikit-learn-intelex") == sklearnex
    assert bounded("scikit-learn<1.2", "scikit-learn-intelex") == sklearnex
    assert bounded("scikit-learn==1.1.3", "Scikit_Learn_Intelex") == {"Scikit_Learn_Intelex":
                                                                      "Scikit_Learn_Intelex<2026.2"}
    # a scikit-learn that may be 1.6 or later, none at all, or a scikit-learn-intelex with its own pin: as written
    for packages in (["scikit-learn", "scikit-learn-intelex"], ["scikit-learn>=1.0", "scikit-learn-intelex"],
                     ["scikit-learn==1.6.1", "scikit-learn-intelex"], ["scikit-learn~=1.5", "scikit-learn-intelex"],
                     ["scikit-learn-intelex"], ["scikit-learn==1.1.3", "scikit-learn-intelex>=2024"]):
        assert bounded(*packages) == {}, packages


def test_a_bound_is_part_of_what_the_environment_is(monkeypatch):
    # an environment built before the bound existed (with the newest release) is not reused for the same file
    from mltrain.environments import nearest_pins

    spec = from_config({"name": "e", "conda": {"dependencies": ["scikit-learn=1.1.3", "scikit-learn-intelex"]}})
    bounded_key = spec.cache_key()
    monkeypatch.setattr(nearest_pins, "BESIDE_OLDER", {})
    assert spec.cache_key() != bounded_key


@pytest.mark.network
def test_which_pins_move_compatible_releases_too_and_wheels_of_any_python_stay():
    from mltrain.environments import nearest_pins

    if not nearest_pins.wheel_versions("scipy", "3.11"):
        pytest.skip("pip's index cannot be reached here")
    # Azure's parallel examples pin scikit-learn~=0.20.0 (no release in that range has a wheel for Python 3.11);
    # cloudpickle 1.1.1 is a py2.py3 wheel and tensorflow 2.12.0 has a 3.11 wheel: both stay
    assert nearest_pins.moves(["scikit-learn~=0.20.0", "cloudpickle==1.1.1", "tensorflow==2.12.0", "pandas"],
                              "3.11") == {"scikit-learn~=0.20.0": "scikit-learn==1.1.3"}


@pytest.mark.slow
@pytest.mark.network
def test_parent_packages_its_own_pins_break_are_given_releases_that_fit(home, project):
    # The ranks see mltrain's interpreter's packages after the environment's own. This one's pandas (3.x) asks for
    # numpy >= 2 and its C extension is built against it: beside an environment's numpy 1.26 it does not import
    # ("C extension: None not built"), as in Azure's scikit-learn HyperDrive notebook, whose scipy pin holds
    # numpy below 1.26 and whose trial imports pandas through mlflow's autologging
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    numpy_req = next(Requirement(r) for r in requires("pandas") or [] if Requirement(r).name == "numpy")
    assert not numpy_req.specifier.contains("1.26.4"), "this test needs a pandas that numpy 1.26 breaks"
    _needs_pypi("numpy")
    (project / "pd.py").write_text("import numpy, pandas\nprint('VERSIONS', numpy.__version__, pandas.__version__)\n"
                                   "print('FROM', pandas.__file__)\n")
    r, run, rank = _in_built_environment(home, project, "pd.py", "old-numpy", "numpy==1.26.4")
    assert r.rc == 0, r.out + r.err
    launcher = (Path(run["dir"]) / "logs" / "launcher.log").read_text()
    assert "packages seen from mltrain's interpreter that this environment's own pins break were given releases " \
           "that fit: " in launcher, launcher
    assert "pandas (numpy>=" in launcher, launcher
    numpy_version, pandas_version = rank.split("VERSIONS ")[1].split()[:2]
    assert numpy_version == "1.26.4" and numpy_req.specifier.contains(numpy_version) is False, rank
    assert str(home) in rank.split("FROM ")[1], rank  # the environment's own pandas, not the parent's
    recorded = json.loads((Path(run["dir"]) / "run.json").read_text())["environment"]["parent_fit"]
    assert recorded["pandas"] == pandas_version


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.tracking  # the script's mlflow.log_metric reaches the run through the MLflow mirror
def test_an_environment_with_an_mlflow_of_its_own_logs_to_its_run(home, project):
    # Azure's scikit-learn HyperDrive notebook's conda file pins mlflow-skinny 2.3.2: another MLflow than
    # mltrain's cannot open the run's database (a newer schema), so its processes log to the run's file store
    _needs_pypi("mlflow-skinny", "2.18.0")
    (project / "log.py").write_text("import mlflow\nprint('mlflow', mlflow.__version__)\nmlflow.log_metric('acc', 0.9)\n")
    r, run, rank = _in_built_environment(home, project, "log.py", "own-mlflow", "mlflow-skinny==2.18.0")
    assert r.rc == 0, r.out + r.err + rank
    assert "mlflow 2.18.0" in rank, rank
    assert (Path(run["dir"]) / "mlruns").is_dir()
    assert "acc: 0.9" in run_mltrain("runs", "show", run["id"], cwd=project).out


@pytest.mark.slow
def test_a_conda_files_environment_keeps_one_distutils_when_pip_is_imported(home, project):
    # mlflow 2.3.2's log_model (Azure's scikit-learn HyperDrive notebook): distutils.dir_util taken, then pip
    # imported (its requirement inference), then copy_tree. Under setuptools' distutils shim, importing pip
    # swaps in the standard library's distutils and copy_tree fails on `distutils._modified`
    (project / "copytree.py").write_text("from distutils import dir_util\nimport pip\nimport os\n"
                                     "os.makedirs('a/b', exist_ok=True)\nopen('a/b/f', 'w').write('x')\n"
                                     "dir_util.copy_tree('a', 'c')\nprint('COPIED', os.path.exists('c/b/f'))\n")
    r, run, rank = _in_built_environment(home, project, "copytree.py", "conda-file", "setuptools==80.9.0", 600)
    assert r.rc == 0, r.out + r.err + rank
    assert "COPIED True" in rank, rank
