"""The job and component files of tests/test_azureml_v2_oracle.py: small files of our own, one case each,
covering the fields mltrain's v2 front end reads and the refusals it makes. Each case names what both
loaders should say: RUNS (Azure loads it, mltrain plans it), or the field both refuse (`Both`), or a
refusal of a file Azure loads for a reason of issue 38 (an Azure-only job type; an Azure resource not
mapped in `.mltrain/`) or one this machine cannot run (`Here`, each listed in the report of issue 38).
A line ending in `# <-` is the line mltrain's refusal must name."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

CMD = "$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json\n"
SWEEP = "$schema: https://azuremlschemas.azureedge.net/latest/sweepJob.schema.json\ntype: sweep\n"
PIPE = "$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json\ntype: pipeline\n"
COMP = "$schema: https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json\ntype: command\n"
ENV = "environment: azureml:AzureML-sklearn-1.5@latest\n"
BASE = CMD + "command: python train.py\ncode: src\n" + ENV

RUNS = "runs"
AZURE_ONLY = "azure-only"      # an Azure-only job type: mltrain's one line names `type`
UNMAPPED = "unmapped"          # an Azure resource not in .mltrain/: the line names the file to add
HERE = "here"                  # Azure loads it; this machine cannot run it (a container build, Ray, ...)
#: Azure's loader takes these values; mltrain refuses them before a run exists, as values no run can use
#: (a negative timeout, an empty range, two bandit slacks): the disagreements issue 38's report lists.
STRICTER = "stricter"


@dataclass
class Case:
    id: str
    job: str                                   # the job file's text (written as job.yml)
    verdict: str = RUNS                        # RUNS, "both", AZURE_ONLY, UNMAPPED or HERE
    at: Optional[str] = None                   # the dotted field mltrain names (and Azure's message names)
    files: Dict[str, str] = field(default_factory=dict)   # more files beside job.yml
    says: str = ""                             # a phrase mltrain's line must hold
    azure_at: Optional[str] = None             # the field Azure's message names, where it names another


def both(id: str, job: str, where: str, files: Optional[Dict[str, str]] = None) -> Case:
    return Case(id, job, "both", where, files or {})


TRAIN_COMPONENT = COMP + """\
name: train_c
version: 3
is_deterministic: false
inputs:
  data: {type: uri_folder}
  lr: {type: number, default: 0.1, min: 0.0001, max: 1}
  epochs: {type: integer, default: 2}
  flag: {type: boolean, default: false}
  mode: {type: string, default: fast, enum: [fast, slow]}
  extra: {type: string, optional: true}
outputs:
  model: {type: uri_folder}
  report: {type: uri_file}
code: ../src
command: >-
  python train.py --data ${{inputs.data}} --lr ${{inputs.lr}} --epochs ${{inputs.epochs}} --flag ${{inputs.flag}}
  --mode ${{inputs.mode}} $[[--extra ${{inputs.extra}}]] --model ${{outputs.model}} --report ${{outputs.report}}
""" + ENV + """\
distribution: {type: pytorch, process_count_per_instance: 1}
resources: {instance_count: 1}
"""

SCORE_COMPONENT = COMP + """\
name: score_c
inputs:
  model: {type: uri_folder}
outputs:
  scores: {type: uri_folder}
code: ../src
command: python train.py ${{inputs.model}} ${{outputs.scores}}
""" + ENV

PIPELINE_COMPONENT = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineComponent.schema.json
type: pipeline
name: train_score
inputs:
  data: {type: uri_folder}
  where: {type: string}
outputs:
  scores: {type: uri_folder}
jobs:
  train:
    type: command
    component: ./train.yml
    compute: ${{parent.inputs.where}}
    inputs:
      data: ${{parent.inputs.data}}
  score:
    type: command
    component: ./score.yml
    inputs:
      model: ${{parent.jobs.train.outputs.model}}
    outputs:
      scores: ${{parent.outputs.scores}}
"""
COMPONENTS = {"components/train.yml": TRAIN_COMPONENT, "components/score.yml": SCORE_COMPONENT,
              "components/train_score.yml": PIPELINE_COMPONENT}

SWEEP_BODY = """\
trial:
  command: python train.py --c ${{search_space.C}} --k ${{search_space.k}} --data ${{inputs.iris}}
  code: src
""" + "  " + ENV + """\
inputs:
  iris: {type: uri_file, path: data/iris.csv}
search_space:
  C: {type: uniform, min_value: 0.1, max_value: 2}
  k: {type: choice, values: [linear, rbf]}
objective: {goal: maximize, primary_metric: acc}
limits: {max_total_trials: 4}
"""

PIPE_STEPS = PIPE + """\
display_name: p1
experiment_name: oracle
settings: {default_compute: azureml:cpu-cluster, continue_on_step_failure: true, force_rerun: false}
inputs:
  iris: {type: uri_folder, path: data}
  node: cpu-cluster
outputs:
  final: {type: uri_folder, mode: rw_mount}
jobs:
"""


def command_cases() -> List[Case]:
    return [
        Case("command-all-fields", BASE + """\
name: oracle_cmd_1
display_name: the whole command
experiment_name: oracle
description: every field a command job has
tags: {team: a, n: "1"}
compute: azureml:cpu-cluster
environment_variables: {A: "1", B: two}
inputs:
  s: hello
  i: 3
  f: 0.5
  b: true
  iris: {type: uri_file, path: data/iris.csv, mode: ro_mount}
  folder: {type: uri_folder, path: data, mode: download}
  model: {type: mlflow_model, path: data}
  custom: {type: custom_model, path: data/iris.csv}
outputs:
  out: {type: uri_folder, mode: rw_mount}
  file: {type: uri_file}
  mm: {type: mlflow_model}
  mounted: {type: uri_folder, mode: mount}
distribution: {type: pytorch, process_count_per_instance: 2}
resources: {instance_count: 1, instance_type: Standard_D2, shm_size: 2g}
limits: {timeout: 600}
identity: {type: user_identity}
queue_settings: {job_tier: standard}
services: {my_jupyter: {type: jupyter_lab}}
""".replace("command: python train.py", "command: >-\n  python train.py ${{inputs.s}} ${{inputs.i}} "
            "${{inputs.f}} ${{inputs.b}} ${{inputs.iris}} ${{inputs.folder}}\n"
            "  $[[--opt ${{inputs.absent}}]] ${{outputs.out}} ${{outputs.file}} ${{name}}")),
        Case("command-mpi", BASE + "distribution: {type: mpi, process_count_per_instance: 2}\n"),
        Case("command-tensorflow", BASE + "distribution: {type: tensorflow, worker_count: 2}\n"),
        Case("command-no-code", CMD + "command: echo hi\n" + ENV),
        Case("command-output-path", BASE + "outputs:\n  o: {type: uri_folder, path: ./written}\n"),
        Case("command-serverless", BASE + "compute: azureml:serverless\n"),
        Case("env-inline-image-conda", CMD + "command: python train.py\ncode: src\nenvironment:\n"
             "  image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest\n  conda_file: conda.yml\n"),
        Case("env-python-image", CMD + "command: python train.py\ncode: src\nenvironment:\n  image: python:3.11\n"),
        Case("env-file", CMD + "command: python train.py\ncode: src\nenvironment: file:./env.yml\n"),
        Case("env-registry", CMD + "command: python train.py\ncode: src\n"
             "environment: azureml://registries/azureml/environments/sklearn-1.5/labels/latest\n"),
        Case("env-version", CMD + "command: python train.py\ncode: src\nenvironment: azureml:AzureML-sklearn-1.5:1\n"),
        Case("data-asset-mapped", BASE + "inputs:\n  d: {type: uri_folder, path: azureml:iris_data@latest}\n"),
        Case("datastore-mapped", BASE + "inputs:\n  d: {type: uri_file, path: "
             "azureml://datastores/workspaceblobstore/paths/example/iris.csv}\n"),
        # refused by both, naming the same field
        both("unknown-field", BASE + "comand: x  # <-\n", "comand"),
        both("bad-type", CMD + "type: comand  # <-\ncommand: echo\n" + ENV, "type"),
        both("distribution-type", BASE + "distribution:\n  type: horovod  # <-\n", "distribution.type"),
        both("distribution-count", BASE + "distribution:\n  type: pytorch\n  process_count_per_instance: two  # <-\n",
             "distribution.process_count_per_instance"),
        both("distribution-field", BASE + "distribution:\n  type: mpi\n  worker_count: 2  # <-\n",
             "distribution.worker_count"),
        both("instance-count", BASE + "resources:\n  instance_count: many  # <-\n", "resources.instance_count"),
        both("resources-field", BASE + "resources:\n  nodes: 2  # <-\n", "resources.nodes"),
        both("limits-field", BASE + "limits:\n  max_total_trials: 2  # <-\n", "limits.max_total_trials"),
        both("input-type", BASE + "inputs:\n  d:\n    type: uri_fiel  # <-\n    path: data/iris.csv\n",
             "inputs.d.type"),
        both("input-mode", BASE + "inputs:\n  d:\n    type: uri_file\n    path: data/iris.csv\n"
             "    mode: rw_mount_x  # <-\n", "inputs.d.mode"),
        both("input-field", BASE + "inputs:\n  d:\n    type: uri_file\n    paht: data/iris.csv  # <-\n",
             "inputs.d.paht"),
        both("input-rw-mount", BASE + "inputs:\n  d:\n    type: uri_folder\n    path: data\n"
             "    mode: rw_mount  # <-\n", "inputs.d.mode"),
        both("job-literal-form", BASE + "inputs:\n  t:\n    type: integer  # <-\n    default: 7\n", "inputs.t.type"),
        Case("negative-timeout", BASE + "limits:\n  timeout: -5  # <-\n", STRICTER, "limits.timeout"),
        both("output-mode", BASE + "outputs:\n  o:\n    type: uri_folder\n    mode: ro_mount  # <-\n",
             "outputs.o.mode"),
        both("output-type", BASE + "outputs:\n  o:\n    type: folder  # <-\n", "outputs.o.type"),
        both("output-field", BASE + "outputs:\n  o:\n    type: uri_folder\n    pth: x  # <-\n", "outputs.o.pth"),
        # Azure-only job types and unmapped resources: Azure loads them, mltrain says why in one line
        Case("automl", "$schema: https://azuremlsdk2.blob.core.windows.net/preview/0.0.1/autoMLJob.schema.json\n"
             "type: automl  # <-\ntask: classification\nprimary_metric: accuracy\ntarget_column_name: y\n"
             "training_data: {type: mltable, path: ./data}\ncompute: azureml:cpu-cluster\n",
             AZURE_ONLY, "type", says="'automl' jobs run only in Azure ML"),
        Case("spark", "$schema: https://azuremlschemas.azureedge.net/latest/sparkJob.schema.json\n"
             "type: spark  # <-\ncode: src\nentry: {file: train.py}\nresources: {instance_type: "
             "standard_e4s_v3, runtime_version: '3.3'}\n", AZURE_ONLY, "type", says="'spark' jobs run only"),
        Case("compute-unmapped", BASE + "compute: azureml:big-gpus  # <-\n", UNMAPPED, "compute",
             says=".mltrain/compute/big-gpus.yaml"),
        Case("data-asset-unmapped", BASE + "inputs:\n  d:\n    type: uri_folder\n"
             "    path: azureml:nowhere@latest  # <-\n", UNMAPPED, "inputs.d.path", says=".mltrain/data/nowhere.yaml"),
        Case("datastore-unmapped", BASE + "inputs:\n  d:\n    type: uri_folder\n"
             "    path: azureml://datastores/other/paths/x/  # <-\n", UNMAPPED, "inputs.d.path",
             says="datastores.yaml"),
        Case("environment-unmapped", CMD + "command: echo\nenvironment: azureml:my-env:3  # <-\n", UNMAPPED,
             "environment", says=".mltrain/environment/"),
        # Azure loads these; nothing here can run them
        Case("docker-build", CMD + "command: echo\nenvironment:\n  build:  # <-\n    path: docker\n", HERE,
             "environment.build", {"docker/Dockerfile": "FROM python:3.11\n"}, says="Docker build context"),
        Case("ray", BASE + "distribution:\n  type: ray  # <-\n", HERE, "distribution.type", says="Ray"),
        Case("parameter-servers", BASE + "distribution:\n  type: tensorflow\n  worker_count: 2\n"
             "  parameter_server_count: 1  # <-\n", HERE, "distribution.parameter_server_count"),
        Case("other-image", CMD + "command: echo\nenvironment:\n  image: nvcr.io/nvidia/pytorch:24.01-py3  # <-\n",
             HERE, "environment.image", says="container runtime"),
        Case("remote-code", CMD + "command: echo\ncode: git+https://github.com/a/b  # <-\n" + ENV, HERE, "code",
             says="remote snapshot"),
    ]


def sweep_cases() -> List[Case]:
    return [
        Case("sweep-random", SWEEP + SWEEP_BODY.replace("limits: {max_total_trials: 4}", "limits: {max_total_trials: 4, "
                                                        "max_concurrent_trials: 2, timeout: 3600, trial_timeout: 600}")
             + """\
sampling_algorithm: {type: random, seed: 7, rule: sobol}
compute: azureml:cpu-cluster
early_termination: {type: bandit, evaluation_interval: 1, delay_evaluation: 2, slack_factor: 0.1}
"""),
        Case("sweep-all-expressions", SWEEP + SWEEP_BODY.replace(
            "  k: {type: choice, values: [linear, rbf]}\n",
            "  k: {type: choice, values: [linear, rbf]}\n  a: {type: randint, upper: 5}\n"
            "  b: {type: quniform, min_value: 1, max_value: 9, q: 2}\n  c: {type: loguniform, min_value: -3, max_value: 0}\n"
            "  d: {type: qloguniform, min_value: 0, max_value: 3, q: 1}\n  e: {type: normal, mu: 0, sigma: 1}\n"
            "  f: {type: qnormal, mu: 0, sigma: 1, q: 1}\n  g: {type: lognormal, mu: 0, sigma: 1}\n"
            "  h: {type: qlognormal, mu: 0, sigma: 1, q: 1}\n") + "sampling_algorithm: random\n"
            "early_termination: {type: truncation_selection, truncation_percentage: 20}\n"),
        both("sweep-truncation-exclude", SWEEP + SWEEP_BODY + "sampling_algorithm: random\nearly_termination:\n"
             "  type: truncation_selection\n  truncation_percentage: 10\n  exclude_finished_jobs: true  # <-\n",
             "early_termination.exclude_finished_jobs"),
        both("sweep-no-limits", SWEEP + SWEEP_BODY.replace("limits: {max_total_trials: 4}\n", "")
             + "sampling_algorithm: random\n", "limits"),
        both("sweep-no-total", SWEEP + SWEEP_BODY.replace("limits: {max_total_trials: 4}\n", "limits:  # <-\n"
             "  max_concurrent_trials: 2\n") + "sampling_algorithm: random\n", "limits.max_total_trials"),
        Case("sweep-empty-range", SWEEP + SWEEP_BODY.replace("min_value: 0.1, max_value: 2", "min_value: 2, max_value: 1")
             + "sampling_algorithm: random\n", STRICTER, "search_space.C.max_value"),
        Case("sweep-two-slacks", SWEEP + SWEEP_BODY + "sampling_algorithm: random\nearly_termination:  # <-\n"
             "  type: bandit\n  slack_factor: 0.1\n  slack_amount: 0.2\n", STRICTER, "early_termination"),
        Case("sweep-grid", SWEEP + SWEEP_BODY.replace("  C: {type: uniform, min_value: 0.1, max_value: 2}\n",
                                                      "  C: {type: choice, values: [0.1, 1]}\n")
             + "sampling_algorithm: grid\nearly_termination: {type: median_stopping, evaluation_interval: 1}\n"),
        Case("sweep-bayesian", SWEEP + SWEEP_BODY + "sampling_algorithm: bayesian\n"),
        both("sweep-space-type", SWEEP + SWEEP_BODY.replace("C: {type: uniform,", "C: {type: unifrom,") +
             "sampling_algorithm: random\n", "search_space.C.type"),
        both("sweep-sampling", SWEEP + SWEEP_BODY + "sampling_algorithm: randomly  # <-\n", "sampling_algorithm"),
        both("sweep-goal", SWEEP + SWEEP_BODY.replace("objective: {goal: maximize,", "objective: {goal: max,")
             + "sampling_algorithm: random\n",
             "objective.goal"),
        both("sweep-policy", SWEEP + SWEEP_BODY + "sampling_algorithm: random\nearly_termination:\n"
             "  type: banditt  # <-\n", "early_termination.type"),
        both("sweep-limits", SWEEP + SWEEP_BODY.replace("limits: {max_total_trials: 4}\n", "limits:\n"
             "  max_total_trials: 4\n  max_trials: 3  # <-\n") + "sampling_algorithm: random\n", "limits.max_trials"),
        both("sweep-unknown", SWEEP + SWEEP_BODY + "sampling_algorithm: random\nsearch_spaces: {}  # <-\n",
             "search_spaces"),
        both("sweep-choice-field", SWEEP + SWEEP_BODY.replace("k: {type: choice, values:", "k: {type: choice, vals:")
             + "sampling_algorithm: random\n", "search_space.k.vals"),
        both("sweep-trial-field", SWEEP + SWEEP_BODY.replace("  code: src\n", "  code: src\n  comand: x  # <-\n")
             + "sampling_algorithm: random\n", "trial.comand"),
    ]


def pipeline_cases() -> List[Case]:
    return [
        Case("pipeline-steps", PIPE_STEPS + """\
  prep:
    type: command
    command: python train.py ${{inputs.raw}} ${{outputs.clean}}
    code: src
""" + "    " + ENV + """\
    inputs: {raw: '${{parent.inputs.iris}}'}
    outputs: {clean: {type: uri_folder}}
  train:
    type: command
    component: ./components/train.yml
    compute: ${{parent.inputs.node}}
    inputs:
      data: ${{parent.jobs.prep.outputs.clean}}
      lr: 0.5
      mode: medium
      flag: 'True'
  score:
    component: file:./components/score.yml
    inputs: {model: '${{parent.jobs.train.outputs.model}}'}
    outputs: {scores: '${{parent.outputs.final}}'}
  registered:
    type: command
    component: azureml:score_c@latest
    inputs: {model: '${{parent.jobs.train.outputs.model}}'}
""", files=COMPONENTS),
        Case("pipeline-component-step", PIPE_STEPS + """\
  both:
    type: pipeline
    component: ./components/train_score.yml
    inputs: {data: '${{parent.inputs.iris}}', where: '${{parent.inputs.node}}'}
    outputs: {scores: '${{parent.outputs.final}}'}
""", files=COMPONENTS),
        Case("pipeline-sweep-step", PIPE_STEPS + """\
  tune:
    type: sweep
    trial: ./components/train.yml
    inputs: {data: '${{parent.inputs.iris}}'}
    search_space: {lr: {type: choice, values: [0.1, 0.2]}}
    sampling_algorithm: grid
    objective: {goal: minimize, primary_metric: loss}
    limits: {max_total_trials: 2, max_concurrent_trials: 1}
    outputs: {model: '${{parent.outputs.final}}'}
""", files=COMPONENTS),
        # Azure's message names the step's `component` (the other form of a step it then tried)
        Case("pipeline-step-field", PIPE_STEPS + "  a:\n    type: command\n    command: echo\n    " + ENV +
             "    comand: x  # <-\n", "both", "jobs.a.comand", azure_at="jobs.a.component"),
        # Azure passes settings it does not know on to its service: mltrain ignores them, said once
        Case("pipeline-settings", PIPE_STEPS.replace("settings: {default_compute: azureml:cpu-cluster, ",
                                                     "settings: {default_compute: azureml:cpu-cluster, retry: 1, ")
             + "  a:\n    command: echo\n    " + ENV),
        both("pipeline-step-type", PIPE_STEPS + "  a:\n    type: comand  # <-\n    command: echo\n    " + ENV,
             "jobs.a.type"),
        both("pipeline-unknown", PIPE_STEPS.replace("display_name: p1\n", "display_name: p1\nstep: 1  # <-\n")
             + "  a:\n    command: echo\n    " + ENV, "step"),
        # Azure's loader takes a component's unknown field and ignores it: mltrain too, said once
        Case("component-field", PIPE_STEPS + "  a:\n    component: ./components/bad.yml\n",
             files={"components/bad.yml": COMP + "name: bad\ncommand: echo\ncomand: x\n" + ENV}),
        both("component-input-type", PIPE_STEPS + "  a:\n    component: ./components/bad.yml\n",
             "inputs.x.type", files={"components/bad.yml": COMP + "name: bad\ncommand: echo\n" + ENV +
                                     "inputs:\n  x:\n    type: strng  # <-\n"}),
        # Azure's loader and _validate() take an input the component does not declare; mltrain refuses it
        # (issue 38 counts this refusal right: Azure's service has no port to give it to)
        Case("step-undeclared-input", PIPE_STEPS + "  a:\n    component: ./components/score.yml\n    inputs:\n"
             "      model: ${{parent.inputs.iris}}\n      zz: 3  # <-\n", STRICTER, "jobs.a.inputs.zz",
             files=COMPONENTS),
        Case("pipeline-automl-node", PIPE_STEPS + "  a:\n    type: automl  # <-\n    task: classification\n"
             "    primary_metric: accuracy\n    target_column_name: y\n"
             "    training_data: {type: mltable, path: ./data}\n", AZURE_ONLY, "jobs.a.type",
             says="'automl' jobs run only in Azure ML"),
        Case("pipeline-component-unmapped", PIPE_STEPS + "  a:\n    component: azureml:not_here@latest  # <-\n",
             UNMAPPED, "jobs.a.component", says="components/not_here.yml"),
    ]


def all_cases() -> List[Case]:
    return command_cases() + sweep_cases() + pipeline_cases()
