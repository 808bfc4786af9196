"""Azure ML v2 job files using a tensorflow distribution (TF_CONFIG in every worker), a pipeline's
settings.continue_on_step_failure, and sweep steps in pipelines, run with real processes. The YAML files
are written here, in Azure's schemas."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import only_run, run_mltrain
from test_azureml_v2 import write

pytestmark = pytest.mark.slow

SHOW_TF_CONFIG = """\
import json, os
print("TF_CONFIG " + json.dumps(json.loads(os.environ["TF_CONFIG"])))
"""

TENSORFLOW_JOB = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python show_tf.py
code: .
{compute}distribution:
  type: tensorflow
  worker_count: 2
"""


def tf_configs(run_dir: Path) -> list:
    """Each rank's TF_CONFIG, as it printed it."""
    out = []
    for rank in (0, 1):
        log = (run_dir / "logs" / f"rank_{rank}.log").read_text()
        line = next(x for x in log.splitlines() if x.startswith("TF_CONFIG "))
        out.append(json.loads(line[len("TF_CONFIG "):]))
    return out


def check_tf_configs(configs: list) -> None:
    first, second = configs
    workers = first["cluster"]["worker"]
    assert len(workers) == 2 and second["cluster"] == {"worker": workers}, configs
    assert [c["task"] for c in configs] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    assert all(c["environment"] == "cloud" for c in configs)
    assert len(set(workers)) == 2 and all(int(w.rsplit(":", 1)[1]) > 0 for w in workers), workers


def test_tensorflow_job_gives_every_worker_tf_config(home, project):
    write(project, "show_tf.py", SHOW_TF_CONFIG)
    write(project, "tf.yml", TENSORFLOW_JOB.format(compute=""))
    r = run_mltrain("job", "create", "--file", "tf.yml", cwd=project, timeout=180)
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    assert run["status"] == "Completed"
    configs = tf_configs(Path(run["dir"]))
    check_tf_configs(configs)
    assert len({w.rsplit(":", 1)[1] for w in configs[0]["cluster"]["worker"]}) == 2  # one host: distinct ports
