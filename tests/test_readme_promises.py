"""What the README and the documentation site promise and no other test touched, each with real processes:
the SIGKILL after run.kill_grace_s (docs/concepts/runs.md), the port registry under concurrent claims and
Slurm's port move on a collision (docs/concepts/distribution.md, the rank environment; docs/concepts/slurm.md),
user config folders (docs/concepts/configs.md), local cancel and status (docs/getting-started.md,
docs/concepts/runs.md), the azureml.core stand-in giving way to a real installation
(docs/concepts/script-jobs.md), compute.gpus capping a non-trivial CUDA_VISIBLE_DEVICES (docs/concepts/configs.md),
the default job on the bundled sample (README.md, docs/concepts/trainer.md), model weights from the file given
(docs/concepts/trainer.md),
the big-source warning and every sweep member snapshotted before the first starts (docs/concepts/script-jobs.md)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import metric_rows, only_run, pid_alive, run_mltrain, runs

import mltrain

IGNORE_TERM = """\
import os, signal, sys, time
if os.environ["RANK"] == "1":
    time.sleep(1.0)
    sys.exit(4)
def on_term(signum, frame):
    with open(os.environ["AML_PARAMETER_mark"], "w") as f:
        f.write(repr(time.time()))
signal.signal(signal.SIGTERM, on_term)   # noted, then ignored: only SIGKILL ends this rank
print("rank 0 ignoring SIGTERM", flush=True)
while True:
    time.sleep(0.05)
"""


@pytest.mark.slow
def test_a_rank_that_ignores_sigterm_is_killed_after_kill_grace_s(home, project, tmp_path):
    (project / "ignore_term.py").write_text(IGNORE_TERM)
    mark = tmp_path / "sigterm_at"
    r = run_mltrain("job=script", "job.script=ignore_term.py", "distribution=pytorch", "distribution.process_count_per_node=2",
                    "run.kill_grace_s=2", f"+job.params.mark={mark}", cwd=project, timeout=60)
    assert r.rc == 1, r.out + r.err
    run = only_run(home)
    assert run["status"] == "Failed" and run["failed_rank"] == 1
    assert mark.is_file(), "rank 0 was never sent SIGTERM"
    waited = run["phases"]["Finalizing"] - float(mark.read_text())
    assert 1.8 <= waited <= 5.0, f"SIGKILL came {waited:.2f}s after SIGTERM; run.kill_grace_s=2"
    assert not pid_alive(int(run["ranks"]["0"]["pid"]))


CLAIMER = """\
import sys, time
from mltrain.backends.local import ports
# The OS hands every process the same few ports, as it may between a pick and rank 0's bind
# (pytorch #73320): only the registry's lock can keep the claims apart.
picks = iter([int(p) for p in sys.argv[1].split(",")] * 3)
ports._os_free_port = lambda host: next(picks)
while time.time() < float(sys.argv[2]):
    pass
claim = ports.claim_port(attempts=len(sys.argv[1].split(",")) * 3)
print(claim.port, flush=True)
time.sleep(1.5)   # hold the claim while the others try
"""


@pytest.mark.slow
def test_concurrent_port_claims_never_share_a_port(tmp_path):
    candidates = []
    for _ in range(6):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            candidates.append(s.getsockname()[1])
    script = tmp_path / "claim.py"
    script.write_text(CLAIMER)
    start_at = time.time() + 1.0
    procs = [subprocess.Popen([sys.executable, str(script), ",".join(map(str, candidates)), str(start_at)],
                              stdout=subprocess.PIPE, text=True) for _ in range(6)]
    claimed = [int(p.communicate(timeout=30)[0].strip()) for p in procs]
    assert sorted(claimed) == sorted(candidates), "six processes claimed at once and two got the same port"


def test_slurm_rank_moves_off_a_taken_port(tmp_path):
    from mltrain.backends.slurm.rank import derived_port, rendezvous

    job_id = "4242"
    with socket.socket() as taken:
        taken.bind(("", derived_port(job_id)))
        taken.listen()
        (tmp_path / "ranks").mkdir()  # made with the run directory
        port = rendezvous(tmp_path, job_id, attempt=0, rank=0, master="127.0.0.1")
    assert port == derived_port(job_id) + 1
    published = json.loads((tmp_path / "ranks" / f"rendezvous_{job_id}_0.json").read_text())
    assert published == {"master_addr": "127.0.0.1", "master_port": port}
    assert rendezvous(tmp_path, job_id, attempt=0, rank=1, master="127.0.0.1") == port  # the others read it


QUICK = "defaults:\n  - trainer_schema\n  - _self_\nepochs: {epochs}\n"


@pytest.mark.parametrize("where", ["conf", ".mltrain", "MLTRAIN_CONFIG_PATH", "--config-dir"])
def test_user_config_folders_add_options(home, project, tmp_path, where):
    folder = {"conf": project / "conf", ".mltrain": project / ".mltrain"}.get(where, tmp_path / "elsewhere")
    (folder / "trainer").mkdir(parents=True)
    (folder / "trainer" / "quick.yaml").write_text(QUICK.format(epochs=7))
    args, env = ["--cfg", "job", "trainer=quick"], {}
    if where == "MLTRAIN_CONFIG_PATH":
        env["MLTRAIN_CONFIG_PATH"] = str(folder)
    elif where == "--config-dir":
        args = ["--config-dir", str(folder)] + args
    r = run_mltrain(*args, cwd=project, env=env)
    assert r.rc == 0, r.err
    assert "epochs: 7" in r.out and "learning_rate: 0.001" in r.out


@pytest.mark.slow
def test_local_runs_status_and_cancel_from_the_cli_and_python(home, project):
    first = mltrain.submit("script", [f"job.source_directory={project}", "job.script=sleeper.py"])
    second = mltrain.submit("script", [f"job.source_directory={project}", "job.script=sleeper.py"])
    for run in (first, second):
        deadline = time.monotonic() + 60
        while run.status != "Running" and time.monotonic() < deadline:
            time.sleep(0.1)
    status = run_mltrain("runs", "status", first.id, cwd=project)
    assert status.out.strip() == f"{first.id} Running"
    canceled = run_mltrain("runs", "cancel", first.id, cwd=project)
    assert canceled.rc == 0 and canceled.out.strip() == f"{first.id} Canceled"
    assert mltrain.Run.get(second.id).cancel() == "Canceled"
    for run in (first, second):
        record = run.record
        assert record["status"] == "Canceled"
        assert not pid_alive(int(record["ranks"]["0"]["pid"]))
    assert run_mltrain("runs", "status", second.id, cwd=project).out.strip() == f"{second.id} Canceled"


@pytest.mark.slow
def test_the_azureml_stand_in_gives_way_to_a_real_installation(home, project, tmp_path):
    """A stand-in for an installed azureml-core (a package of that name on the path): jobs import it,
    not mltrain's shim."""
    real = tmp_path / "site" / "azureml" / "core"
    real.mkdir(parents=True)
    (real.parent / "__init__.py").write_text("")
    (real / "__init__.py").write_text("WHO = 'the installed azureml-core'\n")
    (project / "who.py").write_text("import azureml.core\nprint('azureml.core is', getattr(azureml.core, 'WHO', 'the shim'))\n")
    env = {"PYTHONPATH": str(tmp_path / "site")}
    r = run_mltrain("job=script", "job.script=who.py", cwd=project, env=env)
    assert r.rc == 0, r.out + r.err
    assert "azureml.core is the installed azureml-core" in r.out
    r = run_mltrain("job=script", "job.script=who.py", cwd=project)
    assert "azureml.core is the shim" in r.out  # without one, the stand-in is there


def test_compute_gpus_takes_the_first_n_of_the_visible_devices(home, project):
    r = run_mltrain("job=script", "job.script=show_env.py", "compute.gpus=2", "--dry-run", cwd=project,
                    env={"CUDA_VISIBLE_DEVICES": "3,5,7"})
    assert r.rc == 0, r.err
    assert "CUDA_VISIBLE_DEVICES=3,5\n" in r.out


@pytest.mark.slow
def test_the_default_job_on_the_bundled_sample(home, project):
    """The README's first command (and docs/getting-started.md's), shortened by overrides: the bundled digits, resnet18, a model directory."""
    r = run_mltrain("trainer.epochs=1", "data.image_size=16", cwd=project, timeout=300)
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    assert run["status"] == "Completed"
    model = Path(run["dir"]) / "outputs" / "model"
    assert (model / "model.pt").is_file() or any(model.iterdir())
    rows = metric_rows(run["dir"])
    top1 = [r["value"] for r in rows if r["name"] == "top1_accuracy"]
    # one value, once: how far one epoch beats chance depends on the CPU, so it is not asserted here
    assert len(top1) == 1 and 0.0 <= top1[0] <= 1.0, top1
    assert len(runs(home)) == 1 and os.path.isdir(Path(run["dir"]) / "checkpoints")


@pytest.mark.slow
def test_model_weights_are_loaded_from_the_file_given(home, project, tmp_path):
    import torch
    from torchvision.models import resnet18
    from train_support import FAST, data_args, write_digits

    state = resnet18(weights=None).state_dict()
    state["conv1.weight"] = torch.full_like(state["conv1.weight"], 0.0123)
    weights = tmp_path / "resnet18_marked.pth"
    torch.save(state, weights)
    images = write_digits(tmp_path / "train", per_class=8), write_digits(tmp_path / "val", per_class=4, offset=100)
    r = run_mltrain(*data_args(*images), *FAST, "model.pretrained=true", f"model.weights={weights}", "trainer.epochs=1",
                    "trainer.learning_rate=1e-9", "trainer.weight_decay=0", cwd=project, timeout=300)
    assert r.rc == 0, r.out + r.err
    trained = torch.load(Path(only_run(home)["dir"]) / "outputs" / "model" / "weights.pt", weights_only=True)
    assert torch.allclose(trained["conv1.weight"], torch.full_like(trained["conv1.weight"], 0.0123), atol=1e-5)


def test_a_big_source_folder_is_warned_about(home, project):
    many = project / "many"
    many.mkdir()
    for i in range(2001):
        (many / f"{i}.txt").write_text("x")
    r = run_mltrain("job=command", "job.command=true", cwd=project)
    assert r.rc == 0, r.out + r.err
    assert "warning: the snapshot of" in r.out and "files" in r.out


EDIT_SOURCE = """\
import os, pathlib
print("member", os.environ["AML_PARAMETER_k"], "read", pathlib.Path("message.txt").read_text().strip(), flush=True)
pathlib.Path(os.environ["AML_PARAMETER_src"], "message.txt").write_text("edited by a member\\n")
"""


@pytest.mark.slow
def test_every_sweep_member_is_snapshotted_before_the_first_starts(home, project):
    (project / "edit_source.py").write_text(EDIT_SOURCE)
    r = run_mltrain("-m", "job=script", "job.script=edit_source.py", "+job.params.k=0,1", f"+job.params.src={project}",
                    "compute.max_concurrent_jobs=1", cwd=project)
    assert r.rc == 0, r.out + r.err
    assert (project / "message.txt").read_text() == "edited by a member\n"
    assert "member 0 read original" in r.out and "member 1 read original" in r.out
