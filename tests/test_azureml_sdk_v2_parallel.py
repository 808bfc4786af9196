"""azure-ai-ml's `parallel_run_function` (issue 52), as Azure's sdk/python/jobs/parallel notebooks use it: a parallel
component with a RunFunction task, a node of it in `@dsl.pipeline` over a uri_folder, 2 instances of 2 workers,
submitted with MLClient and streamed, unmodified with MLTRAIN_AZUREML=1."""
from __future__ import annotations

from pathlib import Path

import pytest
from support import runs
from test_azureml_sdk_v2 import run_script

pytest.importorskip("azure.ai.ml", reason="the azure extra: pip install 'mltrain[azure]'")
pytestmark = pytest.mark.slow

NOTEBOOK = """\
from azure.ai.ml import MLClient, Input, Output, dsl
from azure.ai.ml.constants import AssetTypes
from azure.ai.ml.parallel import parallel_run_function, RunFunction
from azure.identity import DefaultAzureCredential

ml_client = MLClient(DefaultAzureCredential(), "00000000-0000-0000-0000-000000000000", "rg", "ws")
score = parallel_run_function(
    name="score_files",
    inputs=dict(job_data_path=Input(type=AssetTypes.URI_FOLDER, description="files to score")),
    outputs=dict(job_output_path=Output(type=AssetTypes.URI_FOLDER)),
    input_data="${{inputs.job_data_path}}",
    instance_count=2,
    max_concurrency_per_instance=2,
    mini_batch_size="5",
    mini_batch_error_threshold=1,
    retry_settings=dict(max_retries=2, timeout=60),
    logging_level="DEBUG",
    task=RunFunction(code="./src", entry_script="score.py", program_arguments="--prefix scored",
                     append_row_to="${{outputs.job_output_path}}"),
)


@dsl.pipeline(default_compute="cpu-cluster")
def batch_scoring(data):
    node = score(job_data_path=data)
    return {"scores": node.outputs.job_output_path}


job = batch_scoring(data=Input(type=AssetTypes.URI_FOLDER, path="./data"))
returned = ml_client.jobs.create_or_update(job, experiment_name="sdk-parallel")
ml_client.jobs.stream(returned.name)
print("FINAL", ml_client.jobs.get(returned.name).status)
"""

SCORE = """\
import argparse, os
def init():
    global prefix
    parser = argparse.ArgumentParser()
    parser.add_argument("--prefix")
    prefix = parser.parse_known_args()[0].prefix
def run(mini_batch):
    return [f"{prefix} {os.path.basename(p)} {open(p).read().strip()}" for p in mini_batch]
"""


def test_parallel_run_function_in_a_dsl_pipeline_scores_every_file(project: Path, home: Path):
    (project / "src").mkdir()
    (project / "src" / "score.py").write_text(SCORE)
    (project / "data").mkdir()
    for i in range(12):
        (project / "data" / f"f{i:02d}.txt").write_text(str(i * 3))
    (project / ".mltrain" / "compute").mkdir(parents=True, exist_ok=True)
    (project / ".mltrain" / "compute" / "cpu-cluster.yaml").write_text("defaults: [local_schema, _self_]\n")
    (project / "batch_scoring.py").write_text(NOTEBOOK)
    out = run_script(project, "batch_scoring.py")
    assert "FINAL Completed" in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]
    step = next(r for r in runs(home) if r["dir"].endswith(".score_files"))
    assert len(step["ranks"]) == 2  # instance_count=2
    rows = (Path(step["dir"]) / "outputs" / "job_output_path" / "parallel_run_step.txt").read_text().splitlines()
    assert rows == [f"scored f{i:02d}.txt {i * 3}" for i in range(12)]
