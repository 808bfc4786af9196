"""Curated environments as Azure defines them (issue 54): the pins of Azure/azureml-assets' files, cited by
file and commit; pins with no wheel for this Python moved to the nearest release and said once; the older
names Azure's examples still use; a conda file's own packages installed from PyPI, or refused in one line
when PyPI has no such package. Real `mltrain` processes; the build test installs from PyPI."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import leftovers, only_run, run_mltrain, runs
from test_azureml_v2 import create, write

from mltrain.environments import CURATED, from_config
from mltrain.environments.materialize import build_notes

AZURE_SOURCE = re.compile(r"^https://github\.com/Azure/azureml-assets/blob/[0-9a-f]{40}/\S+/context/"
                          r"(conda_dependencies\.yaml|requirements\.txt)$")


@pytest.mark.parametrize("name", ["AzureML-sklearn-1.5", "AzureML-lightgbm-3.3", "AzureML-tensorflow-2.16-cuda12",
                                  "AzureML-acpt-pytorch-2.8-cuda12.6", "AzureML-acpt-pytorch-2.2-cuda12.1",
                                  "AzureML-lightgbm-3.2-ubuntu18.04-py37-cpu", "AzureML-mldesigner-minimal",
                                  "AzureML-mldesigner"])
def test_curated_v2_environments_cite_azures_file_and_commit(name):
    assert AZURE_SOURCE.match(CURATED[name]["source"]), CURATED[name]["source"]


def test_sklearn_15_has_azures_pins_and_says_which_it_moved():
    spec = from_config({"name": "AzureML-sklearn-1.5"})
    wanted = spec.installable_packages()
    for pin in ("pandas~=1.5.3", "scipy~=1.10.0", "scikit-learn~=1.5.0", "joblib~=1.2.0"):
        assert pin in wanted, wanted
    # Azure installs the newest scikit-learn-intelex; the newest that imports beside scikit-learn 1.5 is < 2026.2
    assert "scikit-learn-intelex<2026.2" in wanted, wanted
    assert "numpy~=1.22.0" not in wanted and "numpy~=1.23.0" in wanted  # 1.22 has no wheel for Python 3.11
    (moved, conda) = build_notes(spec)
    assert "numpy~=1.22.0 -> numpy~=1.23.0" in moved and "Azure's image has Python 3.10" in moved
    assert "pandas~=1.5.3" in conda


@pytest.mark.parametrize("reference", ["azureml:AzureML-lightgbm-3.2-ubuntu18.04-py37-cpu@latest",
                                       "azureml://registries/azureml/environments/acpt-pytorch-2.2-cuda12.1/labels/latest",
                                       "azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest"])
def test_older_names_of_azures_examples_are_curated(home, project, reference):
    write(project, "job.yml", f"command: python -c 'print(1)'\nenvironment: {reference}\n")
    dry = create(project, "job.yml", "--dry-run")
    assert dry.rc == 0, dry.out + dry.err
    assert leftovers(home) == [] and not (home / "envs").exists()


def test_a_conda_package_pypi_lacks_is_one_line_before_anything_runs(home, project):
    write(project, "env.yml", "dependencies:\n- python=3.11\n- cudatoolkit=11.3\n- pip:\n  - six\n")
    write(project, "job.yml", "command: python -c 'print(1)'\nenvironment:\n  image: mcr.microsoft.com/azureml/"
                              "openmpi4.1.0-ubuntu20.04\n  conda_file: env.yml\n")
    r = create(project, "job.yml")
    assert r.rc == 2 and r.err.count("\n") == 1, r.out + r.err
    assert "job.yml:4 environment.conda_file: env.yml: 'cudatoolkit=11.3' is a conda package with no PyPI " \
           "equivalent" in r.err, r.err
    assert runs(home) == [] and not (home / "envs").exists()
    r = run_mltrain("job=script", "job.script=show_env.py", "environment.name=cuda-env",
                    "environment.python.user_managed=false", 'environment.conda={dependencies: ["cudatoolkit=11.3"]}',
                    cwd=project)
    assert r.rc != 0 and r.err.count("\n") == 1, r.out + r.err
    assert "cuda-env: cudatoolkit=11.3 is a conda package with no PyPI equivalent" in r.err and leftovers(home) == []


@pytest.mark.slow
def test_a_conda_package_is_installed_from_pypi_with_its_version(home, project):
    """six 1.16 from the conda section: before, it was skipped with a warning and the job ran on the host's
    six (1.17), or failed at import where the host had none."""
    write(project, "env.yml", "dependencies:\n- python=3.11\n- six=1.16\n- pip:\n  - toolz==0.12.1\n")
    write(project, "job.yml", "command: python -c 'import six, toolz; print(\"six\", six.__version__)'\n"
                              "environment:\n  image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04\n"
                              "  conda_file: env.yml\n")
    r = create(project, "job.yml", timeout=400)
    assert r.rc == 0, r.out + r.err
    assert "conda packages installed from PyPI, same versions: six=1.16" in r.out + r.err, r.out + r.err
    run = only_run(home)
    assert run["environment"]["conda_from_pypi"] == {"six=1.16": "six==1.16.*"}
    assert "six 1.16.0" in (Path(run["dir"]) / "logs" / "rank_0.log").read_text()


SKLEARN_JOB = """\
command: >-
  python -c "import pandas as pd, sklearnex;
  df = pd.DataFrame({'a': [1]}).append(pd.DataFrame({'a': [2]}));
  print('rows', len(df), 'pandas', pd.__version__)"
environment: azureml:AzureML-sklearn-1.5@latest
"""


@pytest.mark.slow
def test_sklearn_15_runs_what_azures_runs(home, project):
    """Azure's NYC-taxi prep.py calls DataFrame.append (gone in pandas 2) and the scikit-learn HyperDrive
    notebook's trials import sklearnex: both work in Azure's AzureML-sklearn-1.5, so they do here."""
    write(project, "job.yml", SKLEARN_JOB)
    r = create(project, "job.yml", timeout=900)
    assert r.rc == 0, r.out[-3000:] + r.err[-3000:]
    assert "numpy~=1.22.0 -> numpy~=1.23.0" in r.out + r.err  # said once, by the build
    run = only_run(home)
    assert "rows 2 pandas 1.5.3" in (Path(run["dir"]) / "logs" / "rank_0.log").read_text()
    assert run["environment"]["moved_pins"]["numpy~=1.22.0"] == "numpy~=1.23.0"
