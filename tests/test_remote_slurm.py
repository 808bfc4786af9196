"""A remote Slurm cluster over ssh (issue 65): submitted from this machine (the "laptop", root), run on the test
cluster by another local user logged into through a real sshd on a loopback port (scripts/remote_ssh.sh). That
user cannot read the laptop's folders (each test's tmp_path is root's, mode 700), so a path that works only
because both sides share one disk fails here as on a real cluster.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_support import require_cluster
from support import leftovers, mltrain_exe, only_run, require, run_mltrain, runs, until

pytestmark = pytest.mark.slow
LOGIN = "mltrain-remote"
SCRIPT = """\
import os, socket, sys, time
print("hello from", socket.gethostname(), "uid", os.getuid(), flush=True)
time.sleep(float(os.environ.get("AML_PARAMETER_sleep", "0")))
os.makedirs("outputs", exist_ok=True)
with open("outputs/result.txt", "w") as f:
    f.write("42\\n")
from azureml.core import Run
Run.get_context().log("acc", 0.5 + int(os.environ.get("AML_PARAMETER_i", "0")) / 10)
"""


def ssh(*command: str, config: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["ssh", "-F", config or os.environ["MLTRAIN_SSH_CONFIG"], "-o", "BatchMode=yes", LOGIN,
                           *command], capture_output=True, text=True, timeout=60)


def remote_problem() -> str | None:
    if not os.environ.get("MLTRAIN_SSH_CONFIG"):
        return "no remote login: run `bash scripts/remote_ssh.sh start` and source its env.sh"
    probe = ssh("true")
    return None if probe.returncode == 0 else f"ssh {LOGIN} failed: {probe.stderr.strip()}"


@pytest.fixture(autouse=True)
def _remote():
    require_cluster()
    require(remote_problem(), "MLTRAIN_REQUIRE_SLURM", "the remote login (scripts/remote_ssh.sh)")


@pytest.fixture
def laptop(tmp_path, home):
    """A project on the laptop whose named compute `gpu-cluster` is the remote cluster."""
    tmp_path.chmod(0o700)
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (project / "src" / "train.py").write_text(SCRIPT)
    (project / ".mltrain" / "compute").mkdir(parents=True)
    (project / ".mltrain" / "compute" / "gpu-cluster.yaml").write_text(
        f"defaults: [slurm_schema, _self_]\nlogin: {LOGIN}\npoll_s: 0.3\n")
    return project


JOB = ("job=script", "job.script=train.py", "job.source_directory=src", "compute=gpu-cluster")


def remote_blobs() -> int:
    out = ssh("ls ~/.mltrain/remote/blobs | wc -l")
    return int(out.stdout.strip() or 0)


def test_a_script_job_runs_there_as_the_clusters_user_and_its_outputs_come_when_asked(laptop, home):
    assert ssh(f"cat {laptop / 'src' / 'train.py'}").returncode != 0  # the remote side cannot read the laptop's
    r = run_mltrain(*JOB, cwd=laptop, timeout=300)
    assert r.rc == 0, r.out + r.err
    uid = ssh("id -u").stdout.strip()
    assert f"uid {uid}" in r.out and uid != "0"  # rank 0's output, relayed as it was written there
    run = only_run(home)
    assert run["status"] == "Completed" and run["backend"] == "remote"
    there = run["remote"]["run_dir"]
    assert there.startswith(ssh("echo ~").stdout.strip()) and run["slurm"]["job_id"]
    rank0 = Path(run["dir"]) / "logs" / "rank_0.log"
    assert f"uid {uid}" in rank0.read_text()  # each rank's log came back
    show = run_mltrain("runs", "show", run["id"], cwd=laptop)
    assert "acc: 0.5" in show.out and "result.txt" in show.out, show.out
    result = Path(run["dir"]) / "outputs" / "result.txt"
    assert not result.exists()  # outputs stay on the cluster until asked for
    registered = run_mltrain("models", "register", "result", "--run", run["id"], "--path", "outputs/result.txt",
                             cwd=laptop)  # which registering one of them is
    assert registered.rc == 0 and result.read_text() == "42\n", registered.out + registered.err
    result.unlink()
    got = run_mltrain("runs", "download", run["id"], cwd=laptop)
    assert got.rc == 0 and result.read_text() == "42\n", got.out + got.err
    missing = run_mltrain("runs", "download", run["id"], "outputs/nothing.txt", cwd=laptop)
    assert missing.rc != 0 and len(missing.err.strip().splitlines()) == 1 and "nothing.txt" in missing.err


def test_a_second_submit_of_an_unchanged_project_sends_only_the_new_runs_record(laptop, home):
    (laptop / "src" / "big.bin").write_bytes(os.urandom(1 << 20))
    assert run_mltrain(*JOB, cwd=laptop, timeout=300).rc == 0
    before = remote_blobs()
    again = run_mltrain(*JOB, cwd=laptop, timeout=300)
    assert again.rc == 0, again.out + again.err
    assert remote_blobs() - before <= 3  # job.json, run.json and config.yaml name the new run; nothing else travels
    assert [r["status"] for r in runs(home)] == ["Completed", "Completed"]


def test_a_sweep_of_four_members_runs_there(laptop, home):
    r = run_mltrain("-m", *JOB, "+job.params.i=range(0,4)", cwd=laptop, timeout=300)
    assert r.rc == 0, r.out + r.err
    done = runs(home)
    assert sorted(r["status"] for r in done) == ["Completed"] * 4
    shown = sorted(run_mltrain("runs", "show", r["id"], cwd=laptop).out.split("acc: ")[1].split(",")[0] for r in done)
    assert shown == ["0.5", "0.6", "0.7", "0.8"]


def _sweep_folder(home: Path) -> Path:
    return until(lambda: next((home / "runs" / "_sweeps").glob("*/remote.json"), None), 120,
                 "the sweep to be sent").parent


def test_a_sweeps_driver_runs_there_and_goes_on_without_the_laptop(laptop, home):
    """The laptop's command killed once the sweep is sent: its driver there makes all the members (no member was
    made here), and `runs list` later mirrors them, ended."""
    proc = subprocess.Popen(mltrain_exe() + ["-m", *JOB, "+job.params.sleep=2", "+job.params.i=range(0,4)"],
                            cwd=laptop, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    until(lambda: "its driver runs there" in proc.stdout.readline(), 120, "the sweep to be sent")
    folder = _sweep_folder(home)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert len(runs(home)) < 4  # not all of them seen yet: what follows is the catch-up

    def ended() -> list:
        listed = run_mltrain("runs", "list", cwd=laptop)
        assert listed.rc == 0, listed.out + listed.err
        done = runs(home)
        over = json.loads((folder / "remote.json").read_text())["ended"]  # the driver's outcome came back too
        return done if over and len(done) == 4 and all(r["status"] == "Completed" for r in done) else []

    done = until(ended, 120, "the sweep's 4 members to be mirrored Completed, and its end", every_s=1)
    assert {r["backend"] for r in done} == {"remote"} and all(r["remote"]["run_dir"].startswith("/home/") for r in done)
    assert sorted(r["sweep"]["index"] for r in done) == [0, 1, 2, 3]
    assert json.loads((folder / "remote.json").read_text())["outcome"]["status"] == "Completed"
    shown = run_mltrain("runs", "show", done[3]["id"], cwd=laptop).out
    assert "acc: 0.8" in shown or "acc: 0.5" in shown, shown


def test_runs_list_beside_a_command_following_a_sweep_mirrors_each_thing_once(laptop, home):
    """`runs list` in another terminal while the command follows: one look at a time, each from where the last
    left off, so the driver's log is copied here once and the command still prints all of it."""
    proc = subprocess.Popen(mltrain_exe() + ["-m", *JOB, "+job.params.sleep=2", "+job.params.i=range(0,3)"],
                            cwd=laptop, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    folder = _sweep_folder(home)
    while proc.poll() is None:
        listed = run_mltrain("runs", "list", cwd=laptop)
        assert listed.rc == 0, listed.out + listed.err
    out = proc.stdout.read() if proc.stdout else ""
    assert proc.returncode == 0, out
    mirror = json.loads((folder / "remote.json").read_text())
    there = ssh(f"cat {mirror['folder']}/driver.log").stdout
    assert (folder / "cluster_driver.log").read_text() == there  # copied once, whole, in order
    for line in there.splitlines():  # and printed by the command, with this machine's paths
        for here, far in sorted(mirror["pairs"], key=lambda pair: -len(pair[1])):
            line = line.replace(far, here)
        assert line in out, line
    assert sorted(r["status"] for r in runs(home)) == ["Completed"] * 3
    # the member lines name what the user asked, not the sweep folder the laptop passed to the driver there
    assert "#0 Completed" in out and "hydra.sweep.dir" not in out, out


def test_ctrl_c_while_following_a_sweep_then_cancel_it_from_here(laptop, home):
    proc = subprocess.Popen(mltrain_exe() + ["-m", *JOB, "+job.params.sleep=120", "+job.params.i=range(0,2)"],
                            cwd=laptop, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    until(lambda: len(runs(home)) == 2 and all(r["status"] == "Running" for r in runs(home)), 120,
          "both members to be Running there")
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    name = _sweep_folder(home).name
    assert proc.returncode == 130 and f"`mltrain runs cancel {name}` cancels it" in out, out
    assert [r["status"] for r in runs(home)] == ["Running", "Running"]  # Ctrl-C stopped the following, not the sweep
    canceled = run_mltrain("runs", "cancel", name, cwd=laptop, timeout=180)
    assert canceled.rc == 0 and "Canceled" in canceled.out, canceled.out + canceled.err
    assert [r["status"] for r in runs(home)] == ["Canceled", "Canceled"]
    jobs = {str(r["slurm"]["job_id"]).split("_")[0] for r in runs(home)}
    until(lambda: not subprocess.run(["squeue", "-h", "-j", ",".join(jobs)], capture_output=True,
                                     text=True).stdout.strip(), 60, "the Slurm jobs to leave the queue")


def test_a_detached_hyperdrive_sweep_samples_there_and_runs_best_catches_up(laptop, home):
    r = run_mltrain("-m", *JOB, "sweep.sampling=random", "sweep.seed=1", "sweep.primary_metric=acc",
                    "sweep.max_total_runs=3", "+job.params.i=choice(0,1,2,3)", "+job.params.sleep=1", "--detach",
                    cwd=laptop, timeout=600)  # the first sweep on the cluster installs the sweep extra there
    assert r.rc == 0 and "detached" in r.out, r.out + r.err
    folder = _sweep_folder(home)

    def best() -> str:
        shown = run_mltrain("runs", "best", cwd=laptop)
        return shown.out if shown.rc == 0 and json.loads((folder / "remote.json").read_text())["ended"] else ""

    shown = until(best, 180, "the sweep to end there and `runs best` to show it", every_s=1)
    assert "sweep of 3 runs (random, acc maximize)" in shown and "best:" in shown, shown
    assert (folder / "primary_metric.png").is_file() and (folder / "optuna.journal").is_file()
    done = runs(home)
    assert len(done) == 3 and {r["status"] for r in done} == {"Completed"} and {r["backend"] for r in done} == {"remote"}
    best_id = json.loads((folder / "sweep.json").read_text())["best_run_id"]
    assert best_id in {r["id"] for r in done}


def test_a_v2_sweep_file_names_the_remote_compute_and_its_driver_runs_there(laptop, home):
    (laptop / "src" / "trial.py").write_text(
        "import sys\nfrom azureml.core import Run\nRun.get_context().log('acc', float(sys.argv[1]))\n")
    (laptop / "sweep.yml").write_text("""\
$schema: https://azuremlschemas.azureedge.net/latest/sweepJob.schema.json
type: sweep
compute: azureml:gpu-cluster
trial:
  code: src
  command: python trial.py ${{search_space.x}}
sampling_algorithm: grid
search_space:
  x: {type: choice, values: [0.1, 0.3, 0.2]}
objective: {goal: maximize, primary_metric: acc}
limits: {max_total_trials: 3}
""")
    r = run_mltrain("job", "create", "--file", "sweep.yml", cwd=laptop, timeout=600)
    assert r.rc == 0 and "its driver runs there" in r.out, r.out + r.err
    done = runs(home)
    assert len(done) == 3 and {d["backend"] for d in done} == {"remote"} and {d["status"] for d in done} == {"Completed"}
    best = run_mltrain("runs", "best", "--id", cwd=laptop)
    assert best.rc == 0 and "acc: 0.3" in run_mltrain("runs", "show", best.out.strip(), cwd=laptop).out, best.out


def test_a_v1_hyperdrive_sweep_on_the_remote_compute(laptop, home):
    script = laptop / "hd.py"
    script.write_text("""\
from azureml.core import Experiment, ScriptRunConfig, Workspace
from azureml.core.compute import ComputeTarget
from azureml.train.hyperdrive import HyperDriveConfig, PrimaryMetricGoal, RandomParameterSampling, choice
ws = Workspace.create("w", exist_ok=True)
src = ScriptRunConfig(source_directory="src", script="train.py", compute_target=ComputeTarget(ws, "gpu-cluster"))
hd = HyperDriveConfig(run_config=src, hyperparameter_sampling=RandomParameterSampling({"i": choice(0, 1, 2, 3)}),
                      primary_metric_name="acc", primary_metric_goal=PrimaryMetricGoal.MAXIMIZE, max_total_runs=3)
run = Experiment(ws, "remote-hd").submit(hd)
run.wait_for_completion(show_output=False)
best = run.get_best_run_by_primary_metric()
print("STATUS", run.get_status(), "CHILDREN", len(run.get_children_sorted_by_primary_metric()))
print("BEST", best.get_metrics()["acc"])
""")
    r = subprocess.run([sys.executable, str(script)], cwd=laptop, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "STATUS Completed CHILDREN 3" in r.stdout, r.stdout
    done = runs(home)
    assert len(done) == 3 and {r["backend"] for r in done} == {"remote"}
    accs = [json.loads(line)["value"] for r in done for line in (Path(r["dir"]) / "metrics.jsonl").read_text().splitlines()
            if json.loads(line)["name"] == "acc"]  # each member's metrics came back
    assert len(accs) == 3 and f"BEST {max(accs)}" in r.stdout, (accs, r.stdout)


@pytest.mark.parametrize("setting, says", [
    ("compute.login=nosuchhost.invalid", "unknown host: nosuchhost.invalid"),
    ("compute.login=mltrain-remote-untrusted", "is not trusted"),
    ("compute.login=mltrain-remote-nokey", "refused the authentication"),
    ("compute.login=mltrain-remote-readonly", "cannot write to $MLTRAIN_HOME there"),  # its MLTRAIN_HOME: /usr/share
    ("compute.python=python2.7", "python2.7"),  # no such interpreter on the cluster
])
def test_a_login_that_cannot_work_is_one_line_and_leaves_nothing(laptop, home, setting, says):
    r = run_mltrain(*JOB, setting, cwd=laptop, timeout=120)
    assert r.rc != 0
    assert says in r.err and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err, r.err
    assert leftovers(home) == []


def test_a_cluster_whose_sessions_have_no_sbatch_is_one_line_and_leaves_nothing(laptop, home):
    """The cluster's Python started with a PATH that holds no Slurm client (as an account without Slurm's module
    loaded): refused at the probe, before anything is sent."""
    made = ssh('mkdir -p ~/bin && printf \'#!/bin/sh\\nPATH=/nonexistent exec /usr/bin/python3 "$@"\\n\' '
               '> ~/bin/python-without-slurm && chmod +x ~/bin/python-without-slurm && echo $HOME/bin/python-without-slurm')
    assert made.returncode == 0, made.stderr
    r = run_mltrain(*JOB, f"compute.python={made.stdout.strip()}", cwd=laptop, timeout=120)
    assert r.rc != 0 and "sbatch is not on the PATH of its ssh sessions (/nonexistent)" in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err, r.err
    assert leftovers(home) == []


def test_ctrl_c_while_following_leaves_the_run_going_and_logs_f_catches_up(laptop, home):
    proc = subprocess.Popen(mltrain_exe() + [*JOB, "+job.params.sleep=6"], cwd=laptop, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    until(lambda: runs(home) and runs(home)[0]["status"] == "Running", 120, "the run to be Running there")
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    run = only_run(home)
    assert f"`mltrain runs cancel {run['id']}` cancels it" in out, out
    assert run["status"] == "Running"
    followed = run_mltrain("runs", "logs", "-f", run["id"], cwd=laptop, timeout=120)
    assert followed.rc == 0 and "hello from" in followed.out, followed.out + followed.err
    assert only_run(home)["status"] == "Completed"


def test_the_laptops_command_killed_after_submit_and_cancel_from_here(laptop, home):
    proc = subprocess.Popen(mltrain_exe() + [*JOB, "+job.params.sleep=60"], cwd=laptop, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    until(lambda: runs(home) and runs(home)[0]["status"] == "Running", 120, "the run to be Running there")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    run = only_run(home)
    status = run_mltrain("runs", "status", run["id"], cwd=laptop)
    assert "Running" in status.out, status.out + status.err
    canceled = run_mltrain("runs", "cancel", run["id"], cwd=laptop, timeout=120)
    assert canceled.rc == 0 and only_run(home)["status"] == "Canceled", canceled.out + canceled.err
    job = run["slurm"]["job_id"] if "slurm" in run else only_run(home)["slurm"]["job_id"]
    until(lambda: not subprocess.run(["squeue", "-h", "-j", str(job)], capture_output=True, text=True).stdout.strip(),
          60, "the Slurm job to leave the queue")


def remote_ssh(command: str) -> None:
    script = Path(__file__).resolve().parents[1] / "scripts" / "remote_ssh.sh"
    subprocess.run(["bash", str(script), command, str(Path(os.environ["MLTRAIN_SSH_CONFIG"]).parent)], check=True,
                   capture_output=True, timeout=60)


def test_the_connection_lost_mid_run_the_run_goes_on_and_wait_catches_up(laptop, home):
    r = run_mltrain(*JOB, "+job.params.sleep=8", "--detach", cwd=laptop, timeout=300)
    assert r.rc == 0 and "detached" in r.out, r.out + r.err
    run = only_run(home)
    remote_ssh("pause")
    try:
        assert ssh("true").returncode == 255  # no way in: sshd gone, every connection dropped
        status = run_mltrain("runs", "status", run["id"], cwd=laptop)
        assert status.rc == 0 and only_run(home)["status"] in ("Queued", "Running"), status.out + status.err
        time.sleep(3)
    finally:
        remote_ssh("resume")
    waited = run_mltrain("runs", "wait", run["id"], cwd=laptop, timeout=120)
    assert waited.rc == 0 and only_run(home)["status"] == "Completed", waited.out + waited.err
    assert "uid" in (Path(run["dir"]) / "logs" / "rank_0.log").read_text()  # its log caught up


def test_the_python_api_and_the_v1_sdk_name_the_remote_compute(laptop, home):
    script = laptop / "v1.py"
    script.write_text("""\
from azureml.core import Experiment, ScriptRunConfig, Workspace
ws = Workspace.create("w", exist_ok=True)
src = ScriptRunConfig(source_directory="src", script="train.py", compute_target="gpu-cluster")
run = Experiment(ws, "remote-v1").submit(src)
run.wait_for_completion(show_output=False)
print("STATUS", run.get_status(), run.get_metrics()["acc"])
model = run.register_model(model_name="remote-result", model_path="outputs/result.txt")
print("MODEL", model.name, model.version)
run.download_file("outputs/result.txt", "got.txt")
print("GOT", open("got.txt").read().strip())
run.download_files(prefix="outputs", output_directory="all")
print("ALL", open("all/outputs/result.txt").read().strip())
""")
    r = subprocess.run([sys.executable, str(script)], cwd=laptop, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    # the registered file is brought from the cluster first, as Azure registers a remote run's outputs
    assert "STATUS Completed 0.5" in r.stdout and "MODEL remote-result 1" in r.stdout and "GOT 42" in r.stdout
    assert "ALL 42" in r.stdout
    assert only_run(home)["backend"] == "remote"


def test_a_copy_cut_halfway_is_never_run_and_the_next_copy_completes_it(tmp_path, monkeypatch):
    """The cluster's side of the copy, run here as the cluster runs it (python -c, stdin): a cut stream leaves
    only checked blobs and no destination; the next copy sends only the rest and makes it whole."""
    import hashlib
    import io
    import tarfile

    from mltrain.backends.remote import ssh as remote_ssh

    monkeypatch.setenv("MLTRAIN_HOME", str(tmp_path / "cluster"))
    files = {f"f{i}.bin": os.urandom(300_000) for i in range(4)}
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}

    def tar_of(names):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name in names:
                info = tarfile.TarInfo(f"blobs/{digests[name]}")
                info.size = len(files[name])
                tar.addfile(info, io.BytesIO(files[name]))
            manifest = json.dumps({name: [digests[name], 0o644] for name in files}).encode()
            info = tarfile.TarInfo("manifest.json")
            info.size = len(manifest)
            tar.addfile(info, io.BytesIO(manifest))
        return buf.getvalue()

    def far_side(*args, stdin=b""):
        return subprocess.run([sys.executable, "-c", remote_ssh.far_side_source(), *args], input=stdin,
                              capture_output=True, timeout=60)

    dest = str(tmp_path / "cluster" / "runs" / "r1")
    whole = tar_of(files)
    cut = far_side("receive", dest, stdin=whole[: len(whole) // 2])
    assert cut.returncode == 3 and b"cut" in cut.stderr and not os.path.exists(dest)
    missing = json.loads(far_side("missing", stdin=json.dumps(sorted(digests.values())).encode()).stdout)
    assert 0 < len(missing) < 4  # the blobs that arrived whole are kept
    rest = [name for name in files if digests[name] in missing]
    done = far_side("receive", dest, stdin=tar_of(rest))
    assert done.returncode == 0, done.stderr
    assert all(Path(dest, name).read_bytes() == data for name, data in files.items())
    assert not [p for p in Path(dest).parent.iterdir() if p.name.startswith(".")]


V2 = """\
import os
from azure.ai.ml import MLClient, command
from azure.identity import DefaultAzureCredential
ml_client = MLClient(DefaultAzureCredential(), "00000000-0000-0000-0000-000000000000", "rg", "ws")
job = command(code="./src", command="python train.py", compute="gpu-cluster", display_name="remote-v2")
returned = ml_client.jobs.create_or_update(job, experiment_name="sdk-v2")
ml_client.jobs.stream(returned.name)
print("FINAL", ml_client.jobs.get(returned.name).status)
ml_client.jobs.download(returned.name, download_path="dl", all=True)
print("GOT", open("dl/artifacts/outputs/result.txt").read().strip())
"""


def test_the_v2_sdk_creates_streams_and_downloads_a_job_on_the_remote_compute(laptop, home):
    pytest.importorskip("azure.ai.ml", reason="the azure extra: pip install 'mltrain[azure]'")
    (laptop / "v2.py").write_text(V2)
    r = subprocess.run([sys.executable, "v2.py"], cwd=laptop, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "MLTRAIN_AZUREML": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    uid = ssh("id -u").stdout.strip()
    assert f"uid {uid}" in r.stdout and "FINAL Completed" in r.stdout and "GOT 42" in r.stdout, r.stdout
    assert only_run(home)["backend"] == "remote"


RANKS = """\
import os, socket
print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"], "on", socket.gethostname(),
      "master", os.environ["MASTER_ADDR"], flush=True)
"""


def test_a_two_node_job_on_the_remote_two_node_cluster(laptop, home):
    conf = os.environ.get("MLTRAIN_SLURM2_CONF")
    require(None if conf and Path(conf).is_file() else "no two-node cluster: run scripts/slurm_two_nodes.sh start",
            "MLTRAIN_REQUIRE_SLURM", "the two-node Slurm cluster")
    (laptop / "src" / "ranks.py").write_text(RANKS)
    (laptop / ".mltrain" / "compute" / "two-nodes.yaml").write_text(
        "defaults: [slurm_schema, _self_]\nlogin: mltrain-remote-2nodes\npoll_s: 0.3\n")
    r = run_mltrain("job=script", "job.script=ranks.py", "job.source_directory=src", "compute=two-nodes",
                    "distribution=pytorch", "distribution.node_count=2", "distribution.backend=gloo",
                    "run.console=all", cwd=laptop, timeout=300)
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    logs = Path(run["dir"]) / "logs"
    seen = {rank: (logs / f"rank_{rank}.log").read_text().split() for rank in (0, 1)}
    assert [seen[rank][1] for rank in (0, 1)] == ["0", "1"] and {seen[0][5], seen[1][5]} == {"n1", "n2"}, seen
    assert seen[0][7] == seen[1][7] == "n1"  # one rendezvous, on the allocation's first node


PIPELINE = """\
steps:
  make:
    overrides: [job=script, job.source_directory=make, job.script=make.py, compute=gpu-cluster,
                'job.arguments=[--out,${outputs.data}]']
    outputs: [data]
  use:
    overrides: [job=script, job.source_directory=use, job.script=use.py, compute=gpu-cluster,
                'job.arguments=[--data,${inputs.data}]']
    inputs: {data: make.outputs.data}
"""
MAKE = """\
import argparse, os
a = argparse.ArgumentParser(); a.add_argument("--out"); a = a.parse_args()
os.makedirs(a.out, exist_ok=True)
open(os.path.join(a.out, "n.txt"), "w").write("21\\n")
"""
USE = """\
import argparse, os
a = argparse.ArgumentParser(); a.add_argument("--data"); a = a.parse_args()
print("doubled", 2 * int(open(os.path.join(a.data, "n.txt")).read()), flush=True)
"""


def test_a_two_step_pipeline_passes_data_between_its_steps_on_the_cluster_and_reuses_a_step(laptop, home):
    (laptop / "conf" / "pipeline").mkdir(parents=True)
    (laptop / "conf" / "pipeline" / "two.yaml").write_text(PIPELINE)
    mine = os.urandom(8).hex()  # the cluster's runs are shared (and reused) by every laptop: these steps are new
    for name, text in (("make", MAKE), ("use", USE)):
        (laptop / name).mkdir()
        (laptop / name / f"{name}.py").write_text(f"{text}# {mine}\n")
    first = run_mltrain("pipeline=two", cwd=laptop, timeout=300)
    assert first.rc == 0 and "its driver runs there" in first.out, first.out + first.err
    (laptop / "use" / "use.py").write_text(f"{USE}# {mine}, changed\n")
    again = run_mltrain("pipeline=two", cwd=laptop, timeout=300)  # make is reused: its outputs are the cluster's
    assert again.rc == 0, again.out + again.err
    assert re.search(r"^\s+make\s+Completed.*reused", again.out, re.M), again.out
    steps = [r for r in runs(home) if not r.get("pipeline")]
    assert all(r["backend"] == "remote" for r in steps) and len(steps) == 4
    for use in (r["id"] for r in steps if r["id"].endswith(".use")):  # each use step read make's data there
        assert "doubled 42" in run_mltrain("runs", "logs", use, cwd=laptop).out


FAILS_ONCE = """\
import os, sys
os.makedirs("outputs", exist_ok=True)
if not os.path.exists("outputs/tried"):  # the run's own folder there: a resume finds it
    open("outputs/tried", "w").write("1")
    print("fails once", flush=True)
    sys.exit(3)
print("works the second time", flush=True)
"""


def test_a_failed_run_is_resumed_there_and_followed_here(laptop, home):
    (laptop / "src" / "once.py").write_text(FAILS_ONCE)
    first = run_mltrain("job=script", "job.script=once.py", "job.source_directory=src", "compute=gpu-cluster",
                        cwd=laptop, timeout=300)
    assert first.rc != 0 and only_run(home)["status"] == "Failed", first.out + first.err
    run = only_run(home)["id"]
    again = run_mltrain("runs", "resume", run, cwd=laptop, timeout=300)
    assert again.rc == 0 and "works the second time" in again.out, again.out + again.err
    # the first command's relay is not shown again (the rank's whole log, as the resumed driver there prints it, is)
    assert again.out.count("fails once") <= 1, again.out
    done = only_run(home)
    assert done["status"] == "Completed" and len(done["attempts"]) == 1 and done["remote"]["run_dir"].startswith("/home/")
    logs = run_mltrain("runs", "logs", run, cwd=laptop).out
    assert "fails once" in logs and "works the second time" in logs, logs


def test_a_pipeline_whose_driver_ran_there_is_resumed_there(laptop, home):
    (laptop / "conf" / "pipeline").mkdir(parents=True)
    (laptop / "conf" / "pipeline" / "two.yaml").write_text(PIPELINE)
    mine = os.urandom(8).hex()
    (laptop / "make").mkdir()
    (laptop / "make" / "make.py").write_text(f"{MAKE}# {mine}\n")
    (laptop / "use").mkdir()
    (laptop / "use" / "use.py").write_text(FAILS_ONCE.replace('print("works the second time", flush=True)', USE) +
                                           f"# {mine}\n")
    first = run_mltrain("pipeline=two", cwd=laptop, timeout=300)
    assert first.rc != 0, first.out + first.err
    pipeline = next(r for r in runs(home) if r.get("pipeline"))
    assert pipeline["status"] == "Failed"
    again = run_mltrain("runs", "resume", pipeline["id"], cwd=laptop, timeout=300)
    assert again.rc == 0 and "resumed on mltrain-remote" in again.out, again.out + again.err
    assert re.search(r"^\s+make\s+Completed kept", again.out, re.M), again.out  # the step that had ended, kept
    assert {r["status"] for r in runs(home)} == {"Completed"} and len(runs(home)) == 3
    assert "doubled 42" in run_mltrain("runs", "logs", f"{pipeline['id']}.use", cwd=laptop).out
