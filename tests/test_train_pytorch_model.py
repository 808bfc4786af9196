"""Train PyTorch Model and Score Image Model on real (tiny) image data, on the CPU."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support import leftovers, metric_rows, mltrain_exe, only_run, run_mltrain, runs, wait_for_checkpoint
from train_support import FAST, data_args, epoch_metrics, sgd_after_a_skipped_step, write_digits

from mltrain.jobspec.job import FrozenJob

pytestmark = pytest.mark.slow
@pytest.fixture
def images(tmp_path):
    return (write_digits(tmp_path / "train", per_class=24), write_digits(tmp_path / "val", per_class=8, offset=100))


# ----------------------------------------------------------------------------- Designer errors


def test_not_labeled_dataset(home, project, tmp_path, images):
    flat = tmp_path / "flat"
    flat.mkdir()
    (images[0] / "0" / "0.png").rename(flat / "x.png")
    r = run_mltrain(*data_args(flat, images[1]), cwd=project)
    assert r.rc != 0 and "NotLabeledDatasetError" in r.err and "data.train_dir" in r.err
    assert len(r.err.strip().splitlines()) == 1 and leftovers(home) == []


def test_invalid_dataset_when_label_sets_differ(home, project, tmp_path, images):
    val = write_digits(tmp_path / "val2", classes=(0, 1, 5), per_class=4)
    r = run_mltrain(*data_args(images[0], val), cwd=project)
    assert r.rc != 0 and "InvalidDatasetError" in r.err and "only in validation: ['5']" in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_invalid_model_directory(home, project, tmp_path, images):
    junk = tmp_path / "not_a_model"
    junk.mkdir()
    (junk / "notes.txt").write_text("hello")
    r = run_mltrain(*data_args(*images), f"job.untrained_model_dir={junk}", cwd=project)
    assert r.rc != 0 and "InvalidModelDirectoryError" in r.err and len(r.err.strip().splitlines()) == 1
    r = run_mltrain("job=score_image_model", f"job.model_dir={junk}", f"job.image_dir={images[1]}", cwd=project)
    assert r.rc != 0 and "InvalidModelDirectoryError" in r.err


def test_pretrained_weights_are_never_downloaded(home, project, tmp_path, images):
    r = run_mltrain(*data_args(*images), *FAST, "trainer.epochs=1", "model.pretrained=true", cwd=project,
                    env={"TORCH_HOME": str(tmp_path / "empty-hub")})
    assert r.rc != 0
    assert "never downloads" in r.out + r.err and only_run(home)["status"] == "Failed"


def test_nan_loss_stops_the_run(home, project, images):
    r = run_mltrain(*data_args(*images), *FAST, "trainer.epochs=2", "trainer.learning_rate=1e12", cwd=project)
    assert r.rc != 0
    run = only_run(home)
    assert run["status"] == "Failed"
    assert "NaNLossError" in run["error"] and "lower learning rate" in run["error"]


# ----------------------------------------------------------------------------- training


def test_a_step_amp_skips_leaves_the_fused_optimizer_as_plain_sgd():
    """GradScaler skips a step whose gradients overflowed (routine in AMP's first steps). torch's fused SGD left
    the momentum it created on that step unwritten and read it on the next (ResNet-50's loss was NaN within an
    epoch on an H200); the trainer's optimizer trains exactly as unfused SGD does. The fused CPU kernel has the
    same fault, so this runs here; tests/test_gpu.py runs it on cuda."""
    import torch

    from mltrain.components.trainer import sgd

    def plain(m):
        return torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

    ref = sgd_after_a_skipped_step(plain, "cpu")
    assert torch.equal(sgd_after_a_skipped_step(lambda m: sgd(m, 0.01, 0.9, 1e-4, fused=True), "cpu"), ref)


def test_ddp_two_ranks_trains_and_rank0_model_loads(home, project, images):
    r = run_mltrain(*data_args(*images), *FAST, "trainer.epochs=1", "distribution=pytorch",
                    "distribution.process_count_per_node=2", "distribution.backend=gloo",
                    "trainer.learning_rate=0.01", cwd=project, timeout=300)
    assert r.rc == 0, r.out[-3000:] + r.err
    run = only_run(home)
    assert run["world"]["world_size"] == 2
    model_dir = Path(run["dir"]) / "outputs" / "model"
    from mltrain.components.model_directory import load_model_dir

    model, spec = load_model_dir(str(model_dir))
    assert spec["class_names"] == ["0", "1", "2"] and spec["name"] == "resnet18"
    import torch

    assert model(torch.zeros(1, 3, 16, 16)).shape == (1, 3)
    # the effective learning rate is learning_rate x world_size (seed 003)
    ckpt = torch.load(Path(run["dir"]) / "checkpoints" / "latest.pt", weights_only=False)
    assert ckpt["scheduler"]["base_lrs"] == [pytest.approx(0.02)]
    assert "effective learning rate 0.02" in r.out
    metrics = epoch_metrics(run)[1]
    for name in ("train_loss", "train_images_per_second", "val_loss", "top1_accuracy", "top5_accuracy"):
        assert name in metrics
    # only rank 0 wrote the trainer's metrics (every rank samples its own system/ figures)
    rows = [row for row in metric_rows(run["dir"]) if not row["name"].startswith("system/")]
    assert {row["rank"] for row in rows} == {0}


def test_same_seed_gives_identical_metrics(home, project, images):
    for _ in range(2):
        r = run_mltrain(*data_args(*images), *FAST, "trainer.epochs=2", "trainer.seed=7", cwd=project)
        assert r.rc == 0, r.err
    first, second = (epoch_metrics(run) for run in runs(home))
    for epoch in (1, 2):
        for name in ("train_loss", "val_loss", "top1_accuracy"):
            assert first[epoch][name] == second[epoch][name]


def test_untrained_model_directory_replaces_the_model_group(home, project, tmp_path, images):
    untrained = tmp_path / "untrained"
    untrained.mkdir()
    (untrained / "model_spec.json").write_text(json.dumps({"name": "densenet121", "memory_efficient": True}))
    # DenseNet's transition pooling needs at least 32 pixels
    r = run_mltrain(*data_args(*images), *FAST, "data.image_size=32", "trainer.epochs=1",
                    f"job.untrained_model_dir={untrained}", cwd=project, timeout=300)
    assert r.rc == 0, r.err
    spec = json.loads((Path(only_run(home)["dir"]) / "outputs" / "model" / "model_spec.json").read_text())
    assert spec["name"] == "densenet121"


def test_early_stopping_when_validation_loss_stops_improving(home, project, tmp_path, images):
    # Validation images carry permuted labels: the better the model learns, the worse validation gets.
    val = write_digits(tmp_path / "val_perm", per_class=8, offset=100, relabel={0: 1, 1: 2, 2: 0})
    r = run_mltrain(*data_args(images[0], val), *FAST, "trainer.epochs=8", "trainer.patience=1",
                    "trainer.learning_rate=0.003", cwd=project, timeout=300)
    assert r.rc == 0, r.err
    assert "early stopping" in r.out
    summary = json.loads((Path(only_run(home)["dir"]) / "outputs" / "training_summary.json").read_text())
    assert summary["epoch"] < 8
    assert summary["epoch"] == summary["best_epoch"] + 1
    assert len(epoch_metrics(only_run(home))) == summary["epoch"]


def test_resume_continues_from_the_saved_epoch(home, project, images):
    args = [*data_args(*images), *FAST, "trainer.epochs=3", "trainer.patience=5"]
    driver = subprocess.Popen(mltrain_exe() + args, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_checkpoint(home, epoch=1)
        driver.send_signal(signal.SIGINT)
        driver.communicate(timeout=60)
    finally:
        driver.kill()
    run = only_run(home)
    assert run["status"] == "Canceled"
    done_before = set(epoch_metrics(run))
    assert 1 in done_before and 3 not in done_before
    r = run_mltrain("runs", "resume", run["id"], cwd=project, timeout=300)
    assert r.rc == 0, r.out + r.err
    assert "epoch(s) already done" in r.out
    after = json.loads((Path(run["dir"]) / "run.json").read_text())
    assert after["status"] == "Completed" and after["attempts"][0]["status"] == "Canceled"
    rows = metric_rows(run["dir"])
    steps = [row["step"] for row in rows if row["name"] == "val_loss"]
    assert steps == sorted(set(steps)) == [1, 2, 3], "an epoch was trained twice or skipped"
    # trainer.keep_checkpoints=2: epoch 1's checkpoint (90 MB here) is gone once epoch 3's exists
    kept = sorted(p.name for p in (Path(run["dir"]) / "checkpoints").glob("epoch_*.pt"))
    assert kept == ["epoch_2.pt", "epoch_3.pt"], kept


def test_a_run_killed_right_after_logging_an_epoch_does_not_train_it_again(home, project, images):
    """The epoch's checkpoint is saved before its metrics are logged: killed the moment epoch 1's
    metrics appear, the resumed run goes on with epoch 2 and every epoch is logged once. (With the
    metrics written first, the kill fell before the checkpoint and epoch 1 was trained and logged twice.)"""
    args = [*data_args(*images), *FAST, "trainer.epochs=2", "trainer.patience=5"]
    driver = subprocess.Popen(mltrain_exe() + args, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = runs(home)
            metrics = Path(found[0]["dir"]) / "metrics.jsonl" if found else None
            if metrics and metrics.is_file() and '"val_loss"' in metrics.read_text():
                os.killpg(int(json.loads((metrics.parent / "run.json").read_text())["ranks"]["0"]["pid"]), signal.SIGKILL)
                break
            time.sleep(0.005)
        else:
            raise AssertionError("epoch 1 was never logged")
        driver.communicate(timeout=60)
    finally:
        driver.kill()
    run = only_run(home)
    assert run["status"] == "Failed"
    r = run_mltrain("runs", "resume", run["id"], cwd=project, timeout=300)
    assert r.rc == 0, r.out + r.err
    assert "1 epoch(s) already done" in r.out
    rows = metric_rows(run["dir"])
    for name in ("val_loss", "top1_accuracy", "learning_rate"):
        assert [row["step"] for row in rows if row["name"] == name] == [1, 2], name
    ckpts = sorted(p.name for p in (Path(run["dir"]) / "checkpoints").glob("*.pt"))
    assert len([c for c in ckpts if c.startswith("best_epoch_")]) == 1, ckpts  # one file per best, not a copy per epoch


# ----------------------------------------------------------------------------- scoring


def test_score_image_model_one_prediction_per_image(home, project, tmp_path, images):
    # Relative paths, as the README writes them, mean the folder mltrain was started in (the ranks run elsewhere).
    rel = [os.path.relpath(p, project) for p in images]
    r = run_mltrain(*data_args(*rel), *FAST, "trainer.epochs=1", cwd=project)
    assert r.rc == 0, r.err
    trained = only_run(home)
    assert FrozenJob.load(trained["dir"]).config["data"]["train_dir"] == str(images[0])  # recorded absolute
    model_dir = Path(trained["dir"]) / "outputs" / "model"
    r = run_mltrain("job=score_image_model", f"job.model_dir={os.path.relpath(model_dir, project)}",
                    f"job.image_dir={rel[1]}", "distribution=pytorch", "distribution.process_count_per_node=2",
                    cwd=project)
    assert r.rc == 0, r.out[-3000:] + r.err
    scored = [x for x in runs(home) if x["id"].startswith("score")][0]
    lines = (Path(scored["dir"]) / "outputs" / "predictions.csv").read_text().splitlines()
    assert lines[0] == "path,predicted_label,probability,label"  # labelled images: their true label, for Evaluate Model
    assert len(lines) - 1 == len(list(images[1].rglob("*.png"))) == 24
    assert all(line.split(",")[1] in ("0", "1", "2") for line in lines[1:])
    assert all(line.split(",")[3] == Path(line.split(",")[0]).parent.name for line in lines[1:])
    # an untrained model directory is refused
    (tmp_path / "untrained").mkdir()
    (tmp_path / "untrained" / "model_spec.json").write_text(json.dumps({"name": "resnet18", "class_names": ["0"]}))
    r = run_mltrain("job=score_image_model", f"job.model_dir={tmp_path / 'untrained'}", f"job.image_dir={images[1]}", cwd=project)
    assert r.rc != 0 and "InvalidModelDirectoryError" in r.err and "untrained" in r.err
    # weights that do not fit the spec are refused
    spec = json.loads((model_dir / "model_spec.json").read_text())
    (model_dir / "model_spec.json").write_text(json.dumps({**spec, "name": "resnet34"}))
    r = run_mltrain("job=score_image_model", f"job.model_dir={model_dir}", f"job.image_dir={images[1]}", cwd=project)
    assert r.rc != 0 and "InvalidModelDirectoryError" in r.out + r.err


def test_progress_bar_on_a_terminal_and_plain_lines_in_the_log(home, project, images):
    import os
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(mltrain_exe() + [*data_args(*images), *FAST, "trainer.epochs=1"], cwd=project,
                            stdout=slave, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other side is closed
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(master)
    shown = b"".join(chunks).decode()
    assert proc.returncode == 0, shown[-2000:]
    assert "\repoch 1/1 |" in shown and "| 9/9 " in shown  # the bar is redrawn in place
    log = (Path(only_run(home)["dir"]) / "logs" / "rank_0.log").read_text()
    assert "\r" not in log and "|####" not in log
    assert "epoch 1/1 iter 2/9 loss" in log  # print_frequency lines are still logged
