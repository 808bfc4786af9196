"""Azure's own loader as the oracle of mltrain's v2 front end (issue 38): every file of the corpus
(tests/azureml_oracle_corpus.py, files of our own) is loaded by `azure.ai.ml.load_job` (a test dependency,
imported only here) and planned by mltrain as `mltrain job create --file F --dry-run` plans it
(mltrain.azureml.job_plan.plan, in this process: the same function, without a process per file).

A file Azure loads is planned by mltrain, or refused in one line for a reason issue 38 allows (an Azure-only
job type; an Azure resource not mapped in `.mltrain/`, naming the file to add) or one this machine cannot
run (a container build, Ray, parameter servers, a non-Python image, a remote code snapshot). A file Azure
rejects is refused by mltrain too, naming the field Azure's message names, at the line it is written on."""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest
from azureml_oracle_corpus import AZURE_ONLY, HERE, RUNS, SCORE_COMPONENT, STRICTER, UNMAPPED, Case, all_cases

ml = pytest.importorskip("azure.ai.ml")
#: Azure's loader warns about its own use of marshmallow on every file; those are not the point here
pytestmark = pytest.mark.filterwarnings("ignore::Warning")

from mltrain.azureml import job_plan  # noqa: E402  (after the skip: Azure's loader is the point here)
from mltrain.azureml.job_create import JobCreate  # noqa: E402
from mltrain.azureml.yaml_lines import JobFileError  # noqa: E402

CASES = all_cases()
SHARED: Dict[str, str] = {
    "src/train.py": "print('train')\n",
    "data/iris.csv": "a,b\n1,2\n",
    "conda.yml": "name: e\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n    - pyyaml\n",
    "env.yml": "$schema: https://azuremlschemas.azureedge.net/latest/environment.schema.json\n"
               "image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest\nconda_file: conda.yml\n",
}
MLTRAIN_DIR: Dict[str, str] = {
    ".mltrain/compute/cpu-cluster.yaml": "defaults: [local_schema, _self_]\n",
    ".mltrain/data/iris_data.yaml": "path: ../../data\n",
    ".mltrain/datastores.yaml": "'azureml://datastores/workspaceblobstore/paths/example/': data\n",
    ".mltrain/components/score_c.yml": SCORE_COMPONENT.replace("code: ../src\n", ""),
    "data/iris.csv": "a,b\n1,2\n",
}


def _write(folder: Path, files: Dict[str, str]) -> None:
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("oracle")
    _write(root, MLTRAIN_DIR)
    logging.getLogger("azure").setLevel(logging.ERROR)  # its "experimental class" notices
    return root


def azure_says(path: Path) -> Tuple[bool, str]:
    """(loads, message): Azure's offline loader on the file."""
    try:
        ml.load_job(str(path))
    except Exception as exc:  # noqa: BLE001 (any complaint of Azure's loader is its verdict)
        return False, str(exc)
    return True, ""


def mltrain_says(path: Path) -> Any:
    """None when mltrain plans the file, else its refusal (a JobFileError: line, field, problem)."""
    try:
        job_plan.plan(JobCreate(str(path), dry_run=True))
    except JobFileError as exc:
        return exc
    return None


def marked_line(case: Case, path: Path) -> Any:
    """The line the case marks with `# <-` (in the job file, or in the one other file that holds it)."""
    for text in [case.job, *case.files.values()]:
        for number, line in enumerate(text.splitlines(), 1):
            if line.rstrip().endswith("# <-"):
                return number
    return None


def names_field(message: str, dotted: str) -> bool:
    """Azure's message names the field: each part of it appears quoted, as its schema errors write keys,
    or the value check names the last part."""
    message = message.replace('\\"', '"')  # the command schema's errors arrive as JSON inside JSON
    parts = [p for p in re.split(r"[.\[\]]", dotted) if p]
    if dotted in message:  # a pipeline's errors carry the whole path ("path": "jobs.a.type")
        return True
    return all(f'"{p}"' in message or f"'{p}'" in message or f"{p}:" in message for p in parts[-2:])


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_azure_and_mltrain_agree(case: Case, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = project / case.id
    _write(folder, {**SHARED, **case.files, "job.yml": case.job})
    monkeypatch.chdir(folder)
    path = folder / "job.yml"
    loads, azure_message = azure_says(path)
    refusal = mltrain_says(path)
    shown = f"mltrain: {refusal}\nAzure: {' '.join(azure_message.split())[:600]}"
    if case.verdict == RUNS:
        assert loads, shown
        assert refusal is None, shown
        return
    assert refusal is not None, shown
    assert "\n" not in str(refusal), shown
    assert refusal.path.endswith(str(case.at)), shown
    line = marked_line(case, path)
    if line is not None:
        assert refusal.where.endswith(f":{line}"), shown
    assert case.says in str(refusal), shown
    if case.verdict == "both":
        assert not loads, f"Azure loads a file the corpus says it rejects\n{shown}"
        assert names_field(azure_message, case.azure_at or str(case.at)), shown
    else:
        assert case.verdict in (AZURE_ONLY, UNMAPPED, HERE, STRICTER)
        assert loads, f"Azure rejects it too: make the case `both`\n{shown}"


def test_the_corpus_covers_every_kind() -> None:
    kinds = {c.verdict for c in CASES}
    assert kinds == {RUNS, "both", AZURE_ONLY, UNMAPPED, HERE, STRICTER}
    assert len({c.id for c in CASES}) == len(CASES)
