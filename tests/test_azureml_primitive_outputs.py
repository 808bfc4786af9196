"""Primitive outputs of Azure ML v2 pipeline steps (issue 54): a step's output of type string, integer, number
or boolean is a VALUE the step writes (mldesigner's `-> str`, `-> Output(type="integer")`,
`Output(type="boolean", is_control=True)`; a YAML command component's `outputs: {x: {type: string}}` writing
the file `${{outputs.x}}` names), and a later step's input bound to it `${{parent.jobs.A.outputs.x}}`
receives the value, not a path: read when that step starts, from a reused producer too. Real pipelines on
the local backend (the Slurm variant queues the graph whole, each consumer reading its value when Slurm starts
it after its producer). The files are written here, in Azure's shapes."""
from __future__ import annotations

from pathlib import Path

import pytest
from support import leftovers, run_mltrain, runs
from test_azureml_v2 import write

pytestmark = pytest.mark.slow

PRODUCE = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json
type: command
name: produce
version: 1
inputs:
  rows:
    type: uri_folder
outputs:
  count:
    type: integer
  label:
    type: string
    is_control: true
  table:
    type: uri_folder
code: ./src
command: >-
  python produce.py --rows ${{inputs.rows}} --count ${{outputs.count}} --table ${{outputs.table}}
  && printf 'two words' > $AZURE_ML_OUTPUT_label
"""

PRODUCE_PY = """\
import argparse, os
p = argparse.ArgumentParser()
for a in ("--rows", "--count", "--table"):
    p.add_argument(a)
a = p.parse_args()
lines = open(os.path.join(a.rows, "rows.txt")).read().split()
open(os.path.join(a.table, "rows.txt"), "w").write("\\n".join(lines))
open(a.count, "w").write(str(len(lines)))
print("produced", len(lines))
"""

CONSUME = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json
type: command
name: consume
version: 1
inputs:
  count:
    type: integer
  label:
    type: string
  table:
    type: uri_folder
  tag:
    type: string
    default: first
code: ./src
command: >-
  python consume.py --count ${{inputs.count}} --label '${{inputs.label}}' --table ${{inputs.table}}
  --tag ${{inputs.tag}} && echo "env ${{inputs.label}}!" "$AZURE_ML_INPUT_count"
"""

CONSUME_PY = """\
import argparse, os
p = argparse.ArgumentParser()
for a in ("--count", "--label", "--table", "--tag"):
    p.add_argument(a)
a = p.parse_args()
rows = open(os.path.join(a.table, "rows.txt")).read().split()
assert int(a.count) == len(rows), (a.count, rows)
print(f"consumed count={a.count} label={a.label} tag={a.tag}")
"""

PIPELINE = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
display_name: values
settings:
  default_compute: azureml:cpu-cluster
inputs:
  rows:
    type: uri_folder
    path: ./rows
jobs:
  produce:
    type: command
    component: ./produce.yml
    inputs:
      rows: ${{parent.inputs.rows}}
  consume:
    type: command
    component: ./consume.yml
    inputs:
      count: ${{parent.jobs.produce.outputs.count}}
      label: ${{parent.jobs.produce.outputs.label}}
      table: ${{parent.jobs.produce.outputs.table}}
      tag: TAG
"""

LOCAL = "defaults: [local_schema, _self_]\nmax_concurrent_jobs: 2\n"


def _project(project: Path, tag: str = "first", compute: str = LOCAL) -> None:
    write(project, "pipe/src/produce.py", PRODUCE_PY)
    write(project, "pipe/src/consume.py", CONSUME_PY)
    write(project, "pipe/rows/rows.txt", "a\nb\nc\n")
    write(project, "pipe/produce.yml", PRODUCE)
    write(project, "pipe/consume.yml", CONSUME)
    write(project, "pipe/pipeline.yml", PIPELINE.replace("TAG", tag))
    write(project, ".mltrain/compute/cpu-cluster.yaml", compute)


def _steps(home: Path) -> dict:
    return {r["id"].rsplit(".", 1)[1]: r for r in runs(home) if "." in r["id"]}


def _log(run: dict) -> str:
    return (Path(run["dir"]) / "logs" / "rank_0.log").read_text()


def create(project: Path, *extra: str, file: str = "pipe/pipeline.yml", timeout: float = 240):
    return run_mltrain("job", "create", "--file", file, *extra, cwd=project, timeout=timeout)


def test_a_yaml_steps_primitive_outputs_reach_the_next_step_as_values_and_after_reuse(home, project):
    """`outputs: {count: {type: integer}, label: {type: string, is_control: true}}`: the producer writes each
    value to the file ${{outputs.x}} / $AZURE_ML_OUTPUT_x names; the consumer's command gets the values
    (inside single quotes, double quotes and as $AZURE_ML_INPUT_x). A second run with a new consumer
    input reuses the producer, and the consumer still reads its values."""
    _project(project)
    first = create(project)
    assert first.rc == 0, first.out + first.err
    steps = _steps(home)
    assert "consumed count=3 label=two words tag=first" in _log(steps["consume"]), _log(steps["consume"])
    assert "env two words! 3" in _log(steps["consume"])
    assert (Path(steps["produce"]["dir"]) / "outputs" / "count" / "output").read_text() == "3"
    _project(project, tag="second")
    second = create(project)
    assert second.rc == 0, second.out + second.err
    latest = {r["id"].rsplit(".", 1)[1]: r for r in runs(home)[-2:]}
    assert latest["produce"]["pipeline_step"]["reused_from"] == steps["produce"]["id"]
    assert "consumed count=3 label=two words tag=second" in _log(latest["consume"]), _log(latest["consume"])


def test_a_dry_run_says_a_returned_value_is_not_known_yet(home, project):
    _project(project)
    r = create(project, "--dry-run")
    assert r.rc == 0, r.out + r.err
    assert "count<-produce.outputs.count (its integer value, read when the step starts)" in r.out + r.err
    assert "a value a step returns is not known until that step has run" in r.out + r.err
    assert runs(home) == [] and leftovers(home) == []


def test_a_primitive_output_read_as_data_is_one_line(home, project):
    _project(project)
    bad = (project / "pipe" / "consume.yml").read_text().replace("  count:\n    type: integer",
                                                                  "  count:\n    type: uri_folder")
    write(project, "pipe/consume.yml", bad)
    r = create(project)
    assert r.rc == 2 and r.err.count("\n") == 1, r.out + r.err
    assert ("jobs.consume.inputs.count: ${{parent.jobs.produce.outputs.count}} is the integer value step produce "
            "returns, not data") in r.err
    assert runs(home) == []


def test_a_step_that_wrote_no_value_stops_its_reader_in_one_line(home, project):
    _project(project)
    write(project, "pipe/produce.yml", PRODUCE.replace("&& printf 'two words' > $AZURE_ML_OUTPUT_label", ""))
    r = create(project)
    assert r.rc != 0
    consume = _steps(home)["consume"]
    assert consume["status"] == "Failed"
    said = [line for line in _log(consume).splitlines() if line.startswith("mltrain: input label")]
    assert len(said) == 1 and "step produce wrote none" in said[0], _log(consume)


MLDESIGNER_COMPONENTS = """\
from pathlib import Path

from mldesigner import Input, Output, command_component


@command_component()
def train(data: Input(type="uri_folder"), model: Output(type="uri_folder")) -> str:
    (Path(model) / "model.txt").write_text((Path(data) / "rows.txt").read_text().upper())
    return str(Path(model) / "model.txt")


@command_component()
def measure(scale: int = 2) -> Output(type="integer"):
    return 7 * scale


@command_component()
def gate(limit: int = 10) -> Output(type="boolean", is_control=True):
    return limit > 5


@command_component()
def report(model_file: str, size: int, ok: bool, model: Input(type="uri_folder")):
    print("report", Path(model_file).name, size + 1, ok, (Path(model) / "model.txt").read_text().split())
"""

MLDESIGNER_PIPELINE = """\
from azure.ai.ml import Input, MLClient, dsl
from azure.identity import DefaultAzureCredential
from src.components import gate, measure, report, train

ml_client = MLClient(DefaultAzureCredential(), "s", "rg", "ws")


@dsl.pipeline(compute="cpu-cluster")
def pipe(data):
    trained = train(data=data)
    size = measure(scale=3)
    ok = gate(limit=9)
    report(model_file=trained.outputs.output, size=size.outputs.output, ok=ok.outputs.output,
           model=trained.outputs.model)


job = ml_client.jobs.create_or_update(pipe(data=Input(type="uri_folder", path="./rows")))
ml_client.jobs.stream(job.name)
print("STATUS", ml_client.jobs.get(job.name).status)
"""


def test_mldesigner_return_values_reach_the_next_step_as_values(home, project):
    """Azure's notebook 1b's shape: `-> str` (a path the step returns), `-> Output(type="integer")` and a
    control output `-> Output(type="boolean", is_control=True)` read by a later step as its values."""
    pytest.importorskip("mldesigner")
    pytest.importorskip("azure.ai.ml")
    from test_azureml_sdk_v2 import run_script, sdk_project, value

    sdk_project(project)
    write(project, "src/components.py", MLDESIGNER_COMPONENTS)
    write(project, "src/__init__.py", "")
    write(project, "rows/rows.txt", "a b\n")
    write(project, "mld.py", MLDESIGNER_PIPELINE)
    p = run_script(project, "mld.py", timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert value(p.stdout, "STATUS") == "Completed"
    assert "report model.txt 22 True ['A', 'B']" in _log(_steps(home)["report"]), _log(_steps(home)["report"])


SLURM = "defaults: [slurm_schema, _self_]\npoll_s: 0.3\n"


def test_on_slurm_the_consumer_reads_the_value_when_slurm_starts_it(home, project):
    """The graph is queued whole before any value exists (the consumer waits on its producer with afterok):
    the consumer's own rank reads the producer's value file when Slurm starts it."""
    from slurm_support import require_cluster, sacct_settles

    require_cluster()
    _project(project, compute=SLURM)
    r = create(project, timeout=300)
    assert r.rc == 0, r.out + r.err
    steps = _steps(home)
    for name in ("produce", "consume"):
        assert sacct_settles(steps[name]["slurm"]["job_id"]) == "COMPLETED"
    assert "consumed count=3 label=two words tag=first" in _log(steps["consume"]), _log(steps["consume"])


def test_a_step_output_with_its_own_path_is_read_by_a_later_step(home, project):
    """Notebook 1b sets a step's output to `Output(type="uri_folder", path=...)` and a later step reads it:
    the step writes its own folder (passed on, seen by reuse) and the path links to it."""
    _project(project)
    text = (project / "pipe" / "pipeline.yml").read_text().replace(
        "      rows: ${{parent.inputs.rows}}\n",
        "      rows: ${{parent.inputs.rows}}\n    outputs:\n      table:\n        type: uri_folder\n"
        "        path: ./custom/table\n")
    write(project, "pipe/pipeline.yml", text)
    r = create(project)
    assert r.rc == 0, r.out + r.err
    assert "consumed count=3 label=two words tag=first" in _log(_steps(home)["consume"])
    assert (project / "pipe" / "custom" / "table" / "rows.txt").read_text().split() == ["a", "b", "c"]
