"""Azure ML v2 job files as mltrain reads them, with no run started: each refusal is one line naming the
file, the line and the field; the search space keeps Azure's meaning; expressions fill in as Azure's do."""
from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from mltrain.azureml import expressions, job_create, job_plan, sweep_job
from mltrain.azureml.yaml_lines import JobFileError, load
from mltrain.sweeps import space

HELLO = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: echo ${{inputs.greeting}} $[[--n ${{inputs.n}}]] > ${{outputs.out}}/a.txt
code: src
inputs:
  greeting: hello
  n: 3
outputs:
  out:
"""

SWEEP = """\
type: sweep
trial:
  code: src
  command: python t.py --c ${{search_space.C}}
sampling_algorithm: random
search_space:
  C:
    type: uniform
    min_value: 0.1
    max_value: 1.0
objective:
  goal: minimize
  primary_metric: loss
limits:
  max_total_trials: 4
"""


def plan(tmp_path: Path, text: str, *sets: str, name: str = "job.yml"):
    (tmp_path / "src").mkdir(exist_ok=True)
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return job_plan.plan(job_create.JobCreate(file=str(path), sets=sets, dry_run=True))


def refusal(tmp_path: Path, text: str, *sets: str) -> str:
    with pytest.raises(JobFileError) as info:
        plan(tmp_path, text, *sets)
    message = str(info.value)
    assert "\n" not in message
    return message


REFUSALS = [
    # (what the user wrote, the line mltrain prints)
    (SWEEP.replace("type: uniform", "type: unifrom"),
     "job.yml:8 search_space.C.type: 'unifrom' is not one of choice, randint, uniform, quniform, loguniform"),
    (HELLO.replace("code: src", "cod: src"), "job.yml:3 cod: unknown field (did you mean code?)"),
    (SWEEP.replace("max_total_trials", "max_total_trial"),
     "job.yml:15 limits.max_total_trial: unknown field (did you mean max_total_trials?)"),
    ("type: automl\ntask: classification\n", "job.yml:1 type: 'automl' jobs run only in Azure ML"),
    ("type: spark\n", "job.yml:1 type: 'spark' jobs run only in Azure ML"),
    ("type: parallel\n", "job.yml:1 task.entry_script: expected a non-empty string, got None"),
    ("type: parallel\ntask:\n  type: model\n", "job.yml:3 task.type: 'model' tasks run only in Azure ML"),
    ("type: parallel\ntask: {entry_script: s.py}\nmini_batch_size: 2\n",
     "job.yml:1 input_data: a parallel job needs `input_data` (${{inputs.NAME}})"),
    ("type: data_transfer\n", "job.yml:1 type: 'data_transfer' jobs run only in Azure ML"),
    ("type: import\n", "job.yml:1 type: 'import' jobs run only in Azure ML"),
    ("type: commando\ncommand: ls\n", "job.yml:1 type: 'commando' is not one of command, sweep, pipeline"),
    (SWEEP.replace("sampling_algorithm: random", "sampling_algorithm: grid"),
     "job.yml:8 search_space.C.type: uniform cannot be sampled by grid sampling, which takes choice"),
    (SWEEP.replace("sampling_algorithm: random", "sampling_algorithm: bayesian")
     + "early_termination:\n  type: bandit\n  slack_factor: 0.1\n",
     "job.yml:16 early_termination: bayesian sampling takes no early termination policy"),
    (SWEEP + "early_termination:\n  type: bandit\n", "job.yml:16 early_termination: bandit takes exactly one of slack_factor"),
    (SWEEP.replace("goal: minimize", "goal: lowest"), "job.yml:12 objective.goal: 'lowest' is not one of maximize, minimize"),
    (SWEEP.replace("  command: python t.py --c ${{search_space.C}}", "  command: python t.py --c ${{search_space.D}}"),
     "job.yml:4 trial.command: ${{search_space.D}}: no parameter 'D' in search_space (C)"),
    (HELLO.replace("${{inputs.greeting}}", "${{inputs.greting}}"),
     "job.yml:2 command: ${{inputs.greting}}: no input 'greting' (inputs: greeting, n)"),
    (HELLO.replace("code: src", "code: nowhere"), "job.yml:3 code: code folder 'nowhere' does not exist"),
    ("command: ls\nenvironment: azureml:AzureML-sklearn-9.9@latest\n",
     "job.yml:2 environment: environment 'azureml:AzureML-sklearn-9.9@latest' is not a curated environment"),
    ("command: ls\nenvironment:\n  image: nvcr.io/nvidia/pytorch:24.01-py3\n",
     "job.yml:3 environment.image: image nvcr.io/nvidia/pytorch:24.01-py3 needs a container runtime"),
    # (a public blob's wasbs:// URL is fetched as https://: tests/test_azureml_v2_data_uris.py)
    ("command: cat ${{inputs.d}}\ninputs:\n  d:\n    type: uri_file\n    path: abfss://data@acct.dfs.core.windows.net/x.csv\n",
     "job.yml:5 inputs.d.path: 'abfss://data@acct.dfs.core.windows.net/x.csv' has no local copy"),
    ("command: ls ${{inputs.d}}\ninputs:\n  d:\n    type: uri_folder\n    path: azureml:mydata@latest\n",
     "job.yml:5 inputs.d.path: data asset 'azureml:mydata@latest' is not registered here"),
    ("command: ls\ndistribution:\n  type: horovod\n",
     "job.yml:3 distribution.type: 'horovod' is not one of pytorch, mpi, tensorflow, ray"),
    ("command: ls\nresources:\n  instance_count: 0\n", "job.yml:3 resources.instance_count: 0 is invalid; must be >= 1"),
    ("command: [ls]\n", "job.yml:1 command: expected a non-empty string, got a list"),
    ("command: 'ls\n", "job.yml:2 invalid YAML"),
    ("command: echo ${HOME:-x}\n", "job.yml:1 command: '${HOME:-x}': a shell expansion in braces"),
]


@pytest.mark.parametrize("text,expected", REFUSALS, ids=[e.split(":", 2)[-1][:40] for _, e in REFUSALS])
def test_refusals_are_one_line_naming_file_line_and_field(tmp_path, text, expected):
    assert refusal(tmp_path, text).startswith(expected)


def test_set_overrides_a_field_and_is_checked_like_one(tmp_path):
    p = plan(tmp_path, HELLO, "inputs.greeting=bonjour", "inputs.n=5")
    command = p.files[next(iter(p.files))]["job"]["command"]
    assert "echo bonjour --n 5 > $MLTRAIN_OUTPUTS_DIR/out/a.txt" in command
    message = refusal(tmp_path, SWEEP, "limits.max_total_trial=8")  # a set field has no line: its parent's
    assert message.startswith("job.yml:14 limits.max_total_trial: unknown field (did you mean max_total_trials?)")


def test_fields_in_memory_are_planned_as_the_file_would_be_without_reading_it(tmp_path):
    """azure-ai-ml's entity reaches the planner as data (the SDK's dump is kept for the user, never read back):
    the same plan as the file's, relative paths from the named file's folder, though no such file exists."""
    import yaml

    written = plan(tmp_path, HELLO)
    in_memory = job_plan.plan(job_create.JobCreate(file=str(tmp_path / "never-written.yml"), dry_run=True,
                                                  data=yaml.safe_load(HELLO)))
    assert not (tmp_path / "never-written.yml").exists()
    assert in_memory.overrides == [o.replace("=job", "=never-written") for o in written.overrides]
    (mine,), (theirs,) = in_memory.files.values(), written.files.values()
    assert mine["job"] == theirs["job"] and mine["job"]["source_directory"] == str(tmp_path / "src")


def test_optional_block_is_dropped_when_its_input_is_absent():
    text = "train $[[--seed ${{inputs.seed}}]] --lr ${{inputs.lr}}"
    given = {"inputs.lr": "0.1", "inputs.seed": None}
    assert expressions.render(text, given.get) == "train  --lr 0.1"
    given["inputs.seed"] = "7"
    assert expressions.render(text, given.get) == "train --seed 7 --lr 0.1"


def test_shell_braces_survive_mltrain_config():
    assert expressions.shell_safe("echo ${HOME}/x ${USER}_y") == 'echo $HOME/x "$USER"_y'


def test_command_job_maps_to_a_command_run(tmp_path):
    p = plan(tmp_path, HELLO + "environment_variables:\n  A: '1'\nidentity:\n  type: managed\n")
    values = p.files[next(iter(p.files))]
    assert p.overrides[:3] == ["job=command", "environment=current", "distribution=none"]
    assert values["job"]["source_directory"] == str(tmp_path / "src")
    assert values["environment"]["environment_variables"] == {"A": "1"}
    assert values["azureml"]["ignored"] == {"identity": {"type": "managed"}}
    assert any("identity" in n and "ignored" in n for n in p.notes)


def test_distributions_map_onto_the_rank_contract(tmp_path):
    base = "command: python t.py\nresources:\n  instance_count: 2\ndistribution:\n"
    cases = [("  type: pytorch\n  process_count_per_instance: 4\n", "pytorch", 2, 4, {}),
             ("  type: mpi\n  process_count_per_instance: 2\n", "mpi", 2, 2, {}),
             ("  type: tensorflow\n  worker_count: 6\n", "pytorch", 2, 3, {"tf_config": True})]
    for text, kind, nodes, per, extra in cases:
        p = plan(tmp_path, base + text)
        values = p.files[next(iter(p.files))]
        assert f"distribution={kind}" in p.overrides
        assert values["distribution"] == {"node_count": nodes, "process_count_per_node": per, **extra}


LOGS = {"type": "loguniform", "min_value": -6, "max_value": -1}


def test_search_space_keeps_azures_meaning():
    assert sweep_job.grammar({"type": "randint", "upper": 5}) == "range(0,5)"
    log = sweep_job.grammar(LOGS)
    low, high = (float(x) for x in log[len("tag(log,interval("):-2].split(","))
    assert math.isclose(low, math.exp(-6)) and math.isclose(high, math.exp(-1))
    assert sweep_job.grammar({"type": "choice", "values": ["a b", 2]}) == "choice(a\\ b,2)"  # Hydra's own quoting
    assert sweep_job.grammar({"type": "qlognormal", "mu": 0, "sigma": 1, "q": 2}) == "qlognormal(0, 1, 2)"


@pytest.mark.parametrize("text,sampled,expected", [
    ("quniform(0, 10, 2)", 4.9, 4),
    ("qloguniform(0, 3, 5)", math.log(12.4), 10),
    ("normal(10, 2)", 0.5, 10.0),
    ("lognormal(0, 1)", 0.5, 1.0),
    ("qnormal(0, 1, 0.5)", 0.8413447460685429, 1.0),
    ("qlognormal(0, 1, 1)", 0.5, 1),
])
def test_azure_expressions_transform_a_uniform_draw(text, sampled, expected):
    dim = space.parse([], {"x": text}).dimensions[0]
    assert math.isclose(dim.value(sampled), expected, rel_tol=1e-9)


def test_normal_needs_random_sampling():
    search = space.parse([], {"x": "normal(0, 1)"})
    from mltrain.base.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot be sampled by sweep.sampling=bayesian"):
        space.check_sampling(search, "bayesian")
    space.check_sampling(search, "random")


def test_lines_are_recorded_for_nested_fields(tmp_path):
    path = tmp_path / "x.yml"
    path.write_text("a:\n  b:\n    - c: 1\n      d: 2\n")
    jf = load(str(path))
    assert jf.line(("a", "b", 0, "d")) == 4 and jf.line(("a", "missing")) == 1


COMPONENT = """\
type: command
name: train
inputs:
  data: {type: uri_folder}
  epochs: {type: integer, min: 1, max: 10}
  rate: {type: number, default: 0.1}
  schedule: {type: string, default: step, enum: [step, cosine]}
  seed: {type: integer, optional: true}
outputs:
  model: {type: uri_folder}
command: python t.py --data ${{inputs.data}} --epochs ${{inputs.epochs}} $[[--seed ${{inputs.seed}}]]
"""
STEP = """\
type: pipeline
jobs:
  fit:
    type: command
    component: ./c.yml
    inputs:
      data: {type: uri_folder, path: ./src}
"""


@pytest.mark.parametrize("extra,expected", [
    ("", "job.yml:6 jobs.fit.inputs: step fit input epochs is required by component train and has no default"),
    ("      epochs: 11\n", "job.yml:8 jobs.fit.inputs.epochs: step fit input epochs: 11 is above its max 10"),
    ("      epochs: 0\n", "jobs.fit.inputs.epochs: step fit input epochs: 0 is below its min 1"),
    ("      epochs: two\n", "jobs.fit.inputs.epochs: step fit input epochs: 'two' is not of type integer"),
    ("      epochs: 2\n      lr: 0.1\n", "jobs.fit.inputs.lr: component train has no input 'lr'"),
    ("      epochs: 2\n      data: 3\n", "jobs.fit.inputs.data: step fit input data: component train declares uri_folder"),
])
def test_component_inputs_are_checked_as_azure_checks_them(tmp_path, extra, expected):
    (tmp_path / "c.yml").write_text(COMPONENT)
    text = STEP.replace("      data: {type: uri_folder, path: ./src}\n",
                        "      data: {type: uri_folder, path: ./src}\n" + extra) if "data: 3" not in extra else \
        STEP.replace("      data: {type: uri_folder, path: ./src}\n", extra)
    assert expected in refusal(tmp_path, text)


def test_a_value_outside_a_components_enum_is_passed_on_and_noted(tmp_path):
    """Azure's loader and service pass it on (its Designer samples rely on that): so does mltrain."""
    (tmp_path / "c.yml").write_text(COMPONENT.replace("--epochs ${{inputs.epochs}}",
                                                      "--epochs ${{inputs.epochs}} --schedule ${{inputs.schedule}}"))
    p = plan(tmp_path, STEP + "      epochs: 2\n      schedule: linear\n")
    assert "--schedule linear" in p.files["azureml_job/job__fit.yaml"]["job"]["command"]
    assert [n for n in p.notes if "outside the enum" in n] == [
        "step fit input schedule: 'linear' is outside the enum of component train (step, cosine); passed on as "
        "Azure does"]


def test_component_defaults_and_optional_inputs_fill_the_command(tmp_path):
    (tmp_path / "c.yml").write_text(COMPONENT)
    p = plan(tmp_path, STEP + "      epochs: 3\n")
    step = p.files["azureml_job/job__fit.yaml"]
    assert step["job"]["command"] == "python t.py --data ${inputs.data} --epochs 3 "
    pipeline = next(v for k, v in p.files.items() if k.startswith("pipeline/"))
    assert pipeline["steps"]["fit"]["inputs"] == {"data": str(tmp_path / "src")}
    assert pipeline["steps"]["fit"]["outputs"] == ["model"]


def _inline(component: str) -> str:
    """STEP with the component written inline, under `component:`, as Azure's pipeline files allow."""
    body = textwrap.indent(component, "      ")
    return STEP.replace("    component: ./c.yml\n", "    component:\n" + body)


def test_an_inline_component_is_planned_as_its_file_would_be(tmp_path):
    """Azure's pipeline files may hold a component inline; azure-ai-ml's client hands its Python-built components
    over so, in memory, instead of writing a file to read back."""
    (tmp_path / "c.yml").write_text(COMPONENT)
    from_file = plan(tmp_path, STEP + "      epochs: 3\n")
    inline = plan(tmp_path, _inline(COMPONENT) + "      epochs: 3\n")
    assert inline.files["azureml_job/job__fit.yaml"] == from_file.files["azureml_job/job__fit.yaml"]


def test_an_inline_components_mistake_names_the_pipeline_files_line_and_field(tmp_path):
    message = refusal(tmp_path, _inline(COMPONENT.replace("type: command\n", "type: spark\n")) + "      epochs: 3\n")
    assert message.startswith("job.yml:6 jobs.fit.component.type: 'spark' components are not supported"), message


def test_a_designer_component_by_registry_name_is_a_builtin_step(tmp_path):
    (tmp_path / "images").mkdir()
    p = plan(tmp_path, """\
        type: pipeline
        jobs:
          train:
            component: azureml://registries/azureml/components/train_pytorch_model/labels/latest
            inputs:
              training_data: {type: uri_folder, path: ./images}
              validation_data: {type: uri_folder, path: ./images}
              epochs: 2
          score:
            component: azureml:score_image_model@latest
            inputs:
              trained_model: ${{parent.jobs.train.outputs.trained_model}}
              dataset: {type: uri_folder, path: ./images}
        """)
    steps = next(v for k, v in p.files.items() if k.startswith("pipeline/"))["steps"]
    assert steps["train"]["overrides"][:2] == ["job=train_pytorch_model", "data=image_directory"]
    assert "trainer.epochs=2" in steps["train"]["overrides"] and steps["train"]["outputs"] == ["model"]
    assert steps["score"]["inputs"]["trained_model"] == "train.outputs.model"
    assert "job.model_dir=${inputs.trained_model}" in steps["score"]["overrides"]
