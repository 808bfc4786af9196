"""The typed job request (mltrain.launch.request) and the v1 SDK stand-ins' compilation into it: what a
front end builds is what the CLI would run, refusals are one line, and nothing heavy is imported."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from mltrain.base.errors import MltrainError
from mltrain.launch.request import Request, compose, freeze_request, quote

SHIM = Path(__file__).resolve().parents[2] / "mltrain" / "_azureml_shim"


@pytest.mark.parametrize("value", [["--lr", 0.1, "$AZ_BATCHAI_TASK_INDEX", "it's, [odd] {x}", True, None],
                                   {"a": "b c", "n": 2}, "${job.params.lr}", 3.5, "plain"])
def test_a_requests_values_reach_its_config_as_they_are(tmp_path, monkeypatch, value):
    """Typed values, not override text: what a front end hands over is what the job's config holds."""
    monkeypatch.setenv("MLTRAIN_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    cfg = compose(Request(job="command", overrides=("job.command=true",), values={"job": {"params": {"v": value}}}))
    assert OmegaConf.to_container(cfg.job.params, resolve=False)["v"] == value


@pytest.mark.parametrize("name", ["exp", "it's, [odd] {x} $HOME", "a\\b", "ends\\", "x\\'y", "C:\\\\"])
def test_a_requests_names_round_trip_through_hydras_parser(name):
    parsed = OverridesParser.create().parse_overrides([f"experiment_name={quote(name)}"])[0]
    assert parsed.value() == name


def test_no_override_text_is_built_from_values_on_the_typed_paths():
    """The v1 stand-ins hand the engine group choices and typed values (Request.values, a pipeline step's
    `values:`): no module of theirs builds `key.sub=value` text, and the request module has no serialiser."""
    import mltrain.launch.request as request

    assert not hasattr(request, "override") and not hasattr(request, "literal")
    built = re.compile(r"""f["'][+~]*[a-z_]+(\.[a-z_{}]+)+=\{""")
    found = [f"{path.relative_to(SHIM)}:{n}" for path in sorted(SHIM.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if built.search(line)]
    assert not found, found


def test_a_request_freezes_to_the_job_the_cli_would_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MLTRAIN_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    job = freeze_request(Request(job="command", overrides=("job.command=echo hi",), experiment_name="exp",
                                    run_id="r1"))
    assert job.argv == ["/bin/sh", "-c", "echo hi"] and job.backend == "local"
    assert job.experiment == "exp" and job.run_dir == str(tmp_path / "runs" / "r1")
    assert job.sweep_dir is None and not (tmp_path / "runs").exists()  # freezing creates nothing


@pytest.mark.parametrize("overrides,line", [
    (("trainer.epochs=1,2",), "trainer.epochs: 'trainer.epochs=1,2' is a sweep; a job request is one run"),
    (("job.nope=1",), "job.nope: unknown key"),
    (("compute=mars",), "compute=mars is not a known option"),
])
def test_a_bad_request_is_one_line(tmp_path, monkeypatch, overrides, line):
    monkeypatch.setenv("MLTRAIN_HOME", str(tmp_path))
    with pytest.raises(MltrainError) as err:
        freeze_request(Request(job="command", overrides=("job.command=true", *overrides)))
    assert str(err.value).startswith(line) and "\n" not in str(err.value)


def test_the_v1_stand_ins_import_fast_without_torch_hydra_or_mlflow():
    code = ("import sys, time; t = time.perf_counter(); import azureml.core, azureml.train.dnn, "
            "azureml.train.hyperdrive, azureml.pipeline.steps, azureml.widgets; dt = time.perf_counter() - t; "
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'hydra', 'omegaconf', 'mlflow'}); "
            "print(heavy, azureml.core.__file__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("[] ") and "_azureml_shim" in out


def test_v1_distributions_compile_to_mltrain_groups():
    from azureml.core.runconfig import MpiConfiguration, PyTorchConfiguration, TensorflowConfiguration
    from azureml.exceptions import RunConfigurationException

    assert PyTorchConfiguration(process_count=4, node_count=2).to_mltrain() == {
        "kind": "pytorch", "node_count": 2, "process_count_per_node": 2, "backend": "nccl"}
    assert MpiConfiguration(process_count_per_node=3).to_mltrain() == {
        "kind": "mpi", "node_count": 1, "process_count_per_node": 3}
    assert TensorflowConfiguration(worker_count=2, parameter_server_count=0).to_mltrain()["tf_config"] is True
    with pytest.raises(RunConfigurationException, match="parameter servers are not supported"):
        TensorflowConfiguration(worker_count=2).to_mltrain()
    with pytest.raises(RunConfigurationException, match="does not split evenly"):
        PyTorchConfiguration(process_count=3, node_count=2).to_mltrain()


def test_the_estimator_passes_script_params_as_azure_does(tmp_path):
    from azureml.train.dnn import PyTorch

    est = PyTorch(source_directory=str(tmp_path), entry_script="train.py", compute_target="local",
                  script_params={"--epochs": 3, "--data": "/d", "--verbose": ""}, node_count=1,
                  process_count_per_node=2, distributed_backend="mpi")
    job = est._job()
    assert job.arguments == ["--epochs", 3, "--data", "/d", "--verbose"]
    assert job.distribution.to_mltrain() == {"kind": "mpi", "node_count": 1, "process_count_per_node": 2}
    assert job.environment.to_mltrain() == ("current", {"name": "pytorch-estimator", "python": {"user_managed": True},
                                                        "check": "warn"})


def test_a_curated_environment_stays_the_curated_option_until_changed():
    from azureml.core import Environment

    env = Environment.get(None, "AzureML-PyTorch-1.6-GPU")
    assert env.to_mltrain() == ("AzureML-PyTorch-1.6-GPU", {})
    env.python.user_managed_dependencies = True
    option, values = env.to_mltrain()
    assert option == "current" and values["python"] == {"user_managed": True}


def test_a_requests_config_folders_are_searched(tmp_path, monkeypatch):
    """A front end's own config folders (a v1 workspace's .mltrain, found from anywhere) reach the search path."""
    monkeypatch.setenv("MLTRAIN_HOME", str(tmp_path / "home"))
    conf = tmp_path / "ws" / ".mltrain" / "compute"
    conf.mkdir(parents=True)
    (conf / "gpu-cluster.yaml").write_text("defaults: [local_schema, _self_]\nmax_concurrent_jobs: 3\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    job = freeze_request(Request(job="command", overrides=("job.command=true", "compute=gpu-cluster"),
                                    config_dirs=(str(conf.parent),)))
    assert job.compute.max_concurrent_jobs == 3


def test_composing_a_request_leaves_the_callers_hydra_state_as_it_was(tmp_path, monkeypatch):
    """A Hydra app that submits from its task keeps its own HydraConfig and JobRuntime (the launcher
    conformance suites, run in the same process after in-process submissions, hold the rest)."""
    from hydra.core.singleton import Singleton

    monkeypatch.setenv("MLTRAIN_HOME", str(tmp_path))
    before = Singleton.get_state()
    freeze_request(Request(job="command", overrides=("job.command=true",)))
    after = Singleton.get_state()
    assert after["instances"].keys() == before["instances"].keys()
