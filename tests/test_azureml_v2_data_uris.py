"""Data URIs of Azure's job files that need no mapping (issue 54): the workspace's default datastore
(`azureml://datastores/workspaceblobstore/paths/...` and Azure's `${{default_datastore}}`, used throughout
its pipeline examples) is its folder under mltrain's home, as v1's `ws.get_default_datastore()` has it; a
public blob's `wasbs://CONTAINER@ACCOUNT.blob.core.windows.net/PATH` is fetched as its https form; and a
dry run of a web input fetches nothing (no network here: it plans, the run refuses in one line). Real
`mltrain job create` processes."""
from __future__ import annotations

from pathlib import Path

import pytest
from support import leftovers, only_run, runs
from test_azureml_v2 import create, write

from mltrain.azureml.downloads import web_address

DEFAULT_DATASTORE_PIPELINE = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
inputs:
  raw:
    type: uri_folder
    path: azureml://datastores/workspaceblobstore/paths/nyc/raw/
outputs:
  cleaned:
    type: uri_folder
    path: azureml://datastores/${{default_datastore}}/paths/nyc/cleaned/
jobs:
  prep:
    type: command
    command: cat ${{inputs.raw}}/taxi.csv | tr a-z A-Z > ${{outputs.out}}/taxi.csv
    inputs:
      raw: ${{parent.inputs.raw}}
    outputs:
      out: ${{parent.outputs.cleaned}}
"""


def test_the_default_datastore_is_a_folder_without_a_mapping(home, project):
    write(project, "pipe.yml", DEFAULT_DATASTORE_PIPELINE)
    store = home / "datastores" / "workspaceblobstore"
    missing = create(project, "pipe.yml")  # what v1's ws.get_default_datastore().upload would have put there
    assert missing.rc == 2 and missing.err.count("\n") == 1, missing.out + missing.err
    assert (f"pipe.yml:6 inputs.raw.path: 'azureml://datastores/workspaceblobstore/paths/nyc/raw/' is "
            f"{store / 'nyc' / 'raw'} in the workspace's default datastore") in missing.err, missing.err
    (store / "nyc" / "raw").mkdir(parents=True)
    (store / "nyc" / "raw" / "taxi.csv").write_text("vendor,fare\ncmt,9\n")
    dry = create(project, "pipe.yml", "--dry-run")
    assert dry.rc == 0, dry.out + dry.err
    assert f"raw<-{store / 'nyc' / 'raw'}" in dry.out, dry.out
    assert not (store / "nyc" / "cleaned").exists() and leftovers(home) == []
    live = create(project, "pipe.yml")
    assert live.rc == 0, live.out + live.err
    assert (store / "nyc" / "cleaned" / "taxi.csv").read_text() == "VENDOR,FARE\nCMT,9\n"


def test_default_datastore_is_the_pipelines_setting_where_it_sets_one(home, project):
    write(project, ".mltrain/datastores.yaml", "azureml://datastores/mystore/paths/: lake\n")
    (project / "lake" / "nyc" / "raw").mkdir(parents=True)
    (project / "lake" / "nyc" / "raw" / "taxi.csv").write_text("a\n")
    text = DEFAULT_DATASTORE_PIPELINE.replace("workspaceblobstore", "${{default_datastore}}")
    write(project, "pipe.yml", text + "settings:\n  default_datastore: azureml:mystore\n")
    live = create(project, "pipe.yml")
    assert live.rc == 0, live.out + live.err
    assert (project / "lake" / "nyc" / "cleaned" / "taxi.csv").read_text() == "A\n"
    assert not (home / "datastores").exists()


def test_an_unmapped_datastore_other_than_the_default_is_one_line(home, project):
    write(project, "job.yml", "command: ls\noutputs:\n  o:\n    type: uri_folder\n"
                              "    path: azureml://datastores/mystore/paths/x/\n")
    r = create(project, "job.yml")
    assert r.rc == 2 and r.err.count("\n") == 1, r.out + r.err
    assert "job.yml:5 outputs.o.path: 'azureml://datastores/mystore/paths/x/' has no local folder: map a prefix " \
           "of it in .mltrain/datastores.yaml (only the workspace's default datastore, workspaceblobstore, has one " \
           "without)" in r.err
    assert runs(home) == []


BLOB = "wasbs://datasets@azuremlexamples.blob.core.windows.net/titanic.csv"
HTTPS = "https://azuremlexamples.blob.core.windows.net/datasets/titanic.csv"
WASBS_JOB = f"""\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: wc -l < ${{{{inputs.titanic}}}}
inputs:
  titanic:
    type: uri_file
    path: {BLOB}
"""


@pytest.mark.parametrize("uri,https", [
    (BLOB, HTTPS),
    ("wasb://c@acct.blob.core.windows.net/a/b.parquet", "https://acct.blob.core.windows.net/c/a/b.parquet"),
    ("https://example.org/x.csv", "https://example.org/x.csv"),
    ("azureml://datastores/workspaceblobstore/paths/x", None),
    ("wasbs://c@acct.dfs.core.windows.net/x", None),  # a Data Lake account: not a public blob URL
])
def test_web_address_of_a_data_uri(uri, https):
    assert web_address(uri) == https


def test_a_wasbs_blob_url_is_fetched_as_its_https_form_when_the_job_starts(home, project):
    write(project, "job.yml", WASBS_JOB)
    dry = create(project, "job.yml", "--dry-run")  # no network here: a dry run does not ask
    assert dry.rc == 0, dry.out + dry.err
    assert f"(downloaded from {HTTPS} when the job starts)" in dry.out, dry.out
    assert not (home / "cache").exists() and runs(home) == []
    live = create(project, "job.yml")
    assert live.rc == 2 and live.err.count("\n") == 1, live.out + live.err
    assert f"job.yml:6 inputs.titanic.path: cannot download '{HTTPS}'" in live.err, live.err
    assert runs(home) == []


def test_a_wasbs_blob_url_mapped_by_its_https_prefix_reads_the_local_copy(home, project):
    write(project, ".mltrain/datastores.yaml", "https://azuremlexamples.blob.core.windows.net/datasets/: data\n")
    write(project, "data/titanic.csv", "a\nb\nc\n")
    write(project, "job.yml", WASBS_JOB)
    r = create(project, "job.yml")
    assert r.rc == 0, r.out + r.err
    assert (Path(only_run(home)["dir"]) / "logs" / "rank_0.log").read_text().strip().endswith("3")
