"""Designer's image pipeline with real processes on real archives made here: Convert to Image Directory
(zip, tar.gz, tar.bz2, a nested folder, a CSV of paths and labels), its refusals, Init/Apply Image
Transformation, Split Image Directory, and the worked pipeline (conf/pipeline/image_classification.yaml)
locally, with its training step on Slurm, and reused whole on a second run."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from image_support import counts_on_disk, labelled_members, meta, photos, write_table, write_tar, write_zip
from support import run_mltrain

import mltrain

EXPECTED = {"0": 10, "1": 10, "2": 10}


def convert(project: Path, home: Path, source: str, run_id: str = "conv", *extra: str):
    r = run_mltrain("job=convert_to_image_directory", f"job.input_path={source}", f"run.id={run_id}", *extra,
                    cwd=project)
    return r, home / "runs" / run_id / "outputs" / "image_directory"


@pytest.mark.parametrize("kind", ["zip", "tar.gz", "tar.bz2", "folder", "csv"])
def test_class_counts_come_out_right_for_each_input_kind(home, tmp_path, kind):
    project = tmp_path / "p"
    project.mkdir()
    members = labelled_members(top="data/train/")  # nested top folders, as archives of photos often have
    if kind == "zip":
        source = write_zip(project / "photos.zip", members).name
    elif kind in ("tar.gz", "tar.bz2"):
        source = write_tar(project / f"photos.{kind}", members, "w:" + kind.split(".")[1]).name
    elif kind == "folder":
        for name, data in members.items():
            (project / "in" / name).parent.mkdir(parents=True, exist_ok=True)
            (project / "in" / name).write_bytes(data)
        source = "in"
    else:
        source = write_table(project / "table").relative_to(project).as_posix()
    r, out = convert(project, home, source)
    assert r.rc == 0, r.out + r.err
    expected = {f"digit-{k}": v for k, v in EXPECTED.items()} if kind == "csv" else EXPECTED
    assert counts_on_disk(out) == expected
    m = meta(out)
    assert m["labelled"] and m["counts"] == expected and m["images"] == 30 and m["skipped"] == {}
    assert m["digest"].startswith("sha256:")


def test_unsafe_hidden_and_corrupt_members_are_skipped_counted_and_never_written_outside(home, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    good = next(photos(fmt="JPEG"))[2]
    members = labelled_members(top="photos/")
    members.update({"../evil.jpg": good, "/etc/x.jpg": good, "photos/0/../../../up.jpg": good,
                    "__MACOSX/photos/0/._0.png": b"resource fork", "photos/.DS_Store": b"x",
                    "photos/1/corrupt.jpg": good[: len(good) // 2], "photos/2/notes.txt": b"hi"})
    before = set(Path("/etc").iterdir())
    for archive in (write_zip(project / "bad.zip", members), write_tar(project / "bad.tar.gz", members, "w:gz")):
        r, out = convert(project, home, archive.name, run_id=archive.name.replace(".", "-"))
        assert r.rc == 0, r.out + r.err
        assert counts_on_disk(out) == EXPECTED
        assert meta(out)["skipped"] == {"'..' in path": 2, "__MACOSX": 1, "absolute path": 1, "hidden file": 1,
                                        "corrupt or unreadable image": 1, "not an image": 1}
        assert "corrupt or unreadable image (e.g. 'photos/1/corrupt.jpg')" in r.out
    written = {p.name for p in tmp_path.rglob("*")}
    assert not {"evil.jpg", "x.jpg", "up.jpg"} & written
    assert set(Path("/etc").iterdir()) == before


def test_duplicate_names_keep_both_unless_identical(home, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    images = [data for _, _, data in photos(per_class=2)]
    # zip allows one name twice; two archives in one folder bring the same names again
    (project / "in").mkdir()
    write_zip(project / "in" / "a.zip", {"0/x.png": images[0], "1/y.png": images[2]})
    write_zip(project / "in" / "b.zip", {"0/x.png": images[1], "1/y.png": images[2]})
    r, out = convert(project, home, "in")
    assert r.rc == 0, r.out + r.err
    assert sorted(p.name for p in (out / "0").iterdir()) == ["x.png", "x~2.png"]
    assert sorted(p.name for p in (out / "1").iterdir()) == ["y.png"]
    assert meta(out)["renamed_duplicates"] == 1 and meta(out)["skipped"] == {"duplicate (same name and content)": 1}


def test_an_unlabelled_input_trains_into_not_labeled_dataset_error(home, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    write_zip(project / "flat.zip", {f"{label}_{j}.png": data for label, j, data in photos()})
    r, out = convert(project, home, "flat.zip")
    assert r.rc == 0, r.out + r.err
    assert meta(out)["labelled"] is False and len(list(out.glob("*.png"))) == 30 and "unlabelled" in r.out
    t = run_mltrain("data=image_directory", f"data.train_dir={out}", f"data.val_dir={out}", cwd=project)
    assert t.rc != 0 and "Traceback" not in t.err
    assert "NotLabeledDatasetError" in t.err and "unlabelled image directory" in t.err
    assert len(t.err.strip().splitlines()) == 1


def test_bad_input_is_one_line_and_leaves_nothing_half_written(home, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    (project / "broken.zip").write_bytes(b"PK\x03\x04 not really a zip")
    r, out = convert(project, home, "broken.zip")
    assert r.rc != 0 and "Traceback" not in r.out + r.err and "is not a readable zip file" in r.out + r.err
    assert not out.exists() and not (out.parent.exists() and list(out.parent.glob(".*")))
    r = run_mltrain("job=convert_to_image_directory", "job.input_path=nowhere.zip", cwd=project)
    assert r.rc == 2 and r.err.strip().endswith("nowhere.zip' does not exist") and len(r.err.strip().splitlines()) == 1
    (project / "t.parquet").write_bytes(b"PAR1")
    r, _ = convert(project, home, "t.parquet", "pq")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        assert r.rc != 0 and "needs pyarrow: pip install pyarrow" in r.out + r.err and "Traceback" not in r.out + r.err


def test_random_flip_differs_for_training_and_is_fixed_for_inference(home, tmp_path):
    """Init Image Transformation through Azure's module path in a command job, Apply in both modes as jobs;
    then the same image read through each output, with a fixed seed."""
    import torch
    from omegaconf import OmegaConf

    from mltrain.components import data

    project = tmp_path / "p"
    project.mkdir()
    write_zip(project / "photos.zip", labelled_members())
    r, images = convert(project, home, "photos.zip")
    assert r.rc == 0, r.out + r.err
    init = ("python -m azureml.designer.modules.computer_vision.transform.init_image_transformation."
            "init_image_transformation --resize True --size 16 --center-crop --crop-size 16 "
            "--random-horizontal-flip True --random-vertical-flip True --output-path $MLTRAIN_OUTPUTS_DIR/t")
    r = run_mltrain("job=command", f"job.command={init}", "run.id=init", cwd=project)
    assert r.rc == 0, r.out + r.err
    spec = home / "runs" / "init" / "outputs" / "t"
    assert json.loads((spec / "image_transformation.json").read_text())["transforms"] == [
        ["Resize", 16], ["CenterCrop", 16], ["RandomHorizontalFlip"], ["RandomVerticalFlip"]]
    tensors = {}
    for mode in ("For training", "For inference"):
        run_id = mode.split()[1]
        r = run_mltrain("job=apply_image_transformation", f"job.mode={mode}", f"job.input_transform_path={spec}",
                        f"job.input_image_path={images}", f"run.id={run_id}", cwd=project)
        assert r.rc == 0, r.out + r.err
        out = home / "runs" / run_id / "outputs" / "image_directory"
        assert counts_on_disk(out) == EXPECTED
        ops = data.attached_transform(out)
        transform = data.transforms(OmegaConf.create({"data": {"image_size": 16}}), train=mode == "For training", ops=ops)
        image = data.load_image(str(out / "1" / "3.png"))
        torch.manual_seed(0)
        tensors[mode] = [transform(image) for _ in range(12)]
    assert meta(home / "runs" / "inference" / "outputs" / "image_directory")["transform"]["transforms"] == [
        ["Resize", 16], ["CenterCrop", 16]]
    # the module's command line as Azure's image_classification_with_densenet component spells its flags
    apply = ("python -m azureml.designer.modules.computer_vision.transform.apply_image_transformation."
             f"apply_image_transformation --input-image-transform-path {spec} --input-image-dir-path {images} "
             '--mode "For inference" --output-path $MLTRAIN_OUTPUTS_DIR/o')
    r = run_mltrain("job=command", f"job.command='{apply}'", "run.id=azure-apply", cwd=project)
    assert r.rc == 0, r.out + r.err
    assert counts_on_disk(home / "runs" / "azure-apply" / "outputs" / "o") == EXPECTED
    training, inference = tensors["For training"], tensors["For inference"]
    assert any(not torch.equal(training[0], t) for t in training[1:])
    assert all(torch.equal(inference[0], t) for t in inference[1:])
    assert training[0].shape == inference[0].shape == (3, 16, 16)


def test_split_is_stratified_and_the_same_seed_gives_the_same_split(home, tmp_path):
    """The images come from Azure's Convert to Image Directory module path, run in a command job."""
    project = tmp_path / "p"
    project.mkdir()
    write_zip(project / "photos.zip", labelled_members())
    command = ("python -m azureml.designer.modules.computer_vision.preprocess.convert_to_image_directory."
               "convert_to_image_directory --input-path photos.zip --output-path $MLTRAIN_OUTPUTS_DIR/images")
    r = run_mltrain("job=command", f"job.command={command}", "run.id=azure-convert", cwd=project)
    assert r.rc == 0, r.out + r.err
    images = home / "runs" / "azure-convert" / "outputs" / "images"
    assert counts_on_disk(images) == EXPECTED

    def split(run_id: str, seed: int):
        s = run_mltrain("job=split_image_directory", f"job.src_path={images}", "job.fraction=0.8", f"job.seed={seed}",
                        f"run.id={run_id}", cwd=project)
        assert s.rc == 0, s.out + s.err
        outs = home / "runs" / run_id / "outputs"
        return [sorted(str(p.relative_to(outs / d)) for p in (outs / d).rglob("*.png"))
                for d in ("image_directory_1", "image_directory_2")], outs

    (first, second), outs = split("s1", 7)
    assert counts_on_disk(outs / "image_directory_1") == {"0": 8, "1": 8, "2": 8}
    assert counts_on_disk(outs / "image_directory_2") == {"0": 2, "1": 2, "2": 2}
    assert not set(first) & set(second) and len(first) + len(second) == 30
    assert meta(outs / "image_directory_1")["split"] == {"fraction": 0.8, "seed": 7, "stratified": True}
    assert (outs / "image_directory_1" / first[0]).stat().st_nlink >= 2  # linked, not copied
    assert split("s2", 7)[0] == [first, second]
    assert split("s3", 8)[0] != [first, second]


WORKED = Path(mltrain.__file__).parent / "conf" / "pipeline" / "image_classification.yaml"


def _pipeline_project(tmp_path: Path, train_on_slurm: bool = False) -> Path:
    project = tmp_path / "p"
    (project / "conf" / "pipeline").mkdir(parents=True)
    write_zip(project / "photos.zip", labelled_members())
    text = WORKED.read_text()
    if train_on_slurm:
        text = text.replace("overrides: [model=densenet121,", "overrides: [compute=slurm, model=densenet121,")
        assert "compute=slurm" in text
    (project / "conf" / "pipeline" / "worked.yaml").write_text(text)
    return project


def _pipeline(home: Path) -> dict:
    found = [json.loads((d / "run.json").read_text()) for d in (home / "runs").iterdir() if (d / "run.json").is_file()]
    return sorted((r for r in found if r.get("pipeline")), key=lambda r: r["created"])


SHORT = ["trainer.epochs=1", "trainer.batch_size=8"]


@pytest.mark.slow
def test_the_worked_pipeline_runs_end_to_end_and_a_second_run_reuses_every_step(home, tmp_path):
    project = _pipeline_project(tmp_path)
    r = run_mltrain("pipeline=worked", *SHORT, cwd=project, timeout=600)
    assert r.rc == 0, r.out + r.err
    first = _pipeline(home)[-1]
    steps = first["pipeline"]["steps"]
    assert set(steps) == {"convert", "init", "transform", "split", "train", "score", "evaluate"}
    assert {s["status"] for s in steps.values()} == {"Completed"}
    train = json.loads((Path(steps["train"]["run_dir"]) / "run.json").read_text())
    assert train["world"]["world_size"] == 2
    spec = json.loads((Path(steps["train"]["run_dir"]) / "outputs" / "model" / "model_spec.json").read_text())
    assert spec["name"] == "densenet121" and spec["image_size"] == 32 and spec["class_names"] == ["0", "1", "2"]
    assert spec["image_transformation"] == [["Resize", 36]]  # the random operations are left for training
    evaluation = Path(steps["evaluate"]["run_dir"]) / "outputs" / "evaluation"
    result = json.loads((evaluation / "evaluation.json").read_text())
    assert result["images"] == 6 and sum(map(sum, result["confusion_matrix"]["matrix"])) == 6
    assert set(result["per_class"]) <= {"0", "1", "2"} and 0.0 <= result["accuracy"] <= 1.0
    assert (evaluation / "confusion_matrix.png").read_bytes()[:4] == b"\x89PNG"

    again = run_mltrain("pipeline=worked", *SHORT, cwd=project, timeout=300)
    assert again.rc == 0, again.out + again.err
    second = _pipeline(home)[-1]
    assert {s["reused_from"] for s in second["pipeline"]["steps"].values()} == {s["run_id"] for s in steps.values()}
    assert again.out.count("reused: run ") == 7


@pytest.mark.slow
def test_the_worked_pipeline_trains_on_slurm(home, tmp_path):
    from slurm_support import require_cluster

    require_cluster()
    project = _pipeline_project(tmp_path, train_on_slurm=True)
    r = run_mltrain("pipeline=worked", *SHORT, cwd=project, timeout=600)
    assert r.rc == 0, r.out + r.err
    steps = _pipeline(home)[-1]["pipeline"]["steps"]
    assert {s["status"] for s in steps.values()} == {"Completed"}
    train = json.loads((Path(steps["train"]["run_dir"]) / "run.json").read_text())
    assert train["slurm"]["job_id"] and train["world"]["world_size"] == 2
    assert json.loads((Path(steps["evaluate"]["run_dir"]) / "outputs" / "evaluation" / "evaluation.json")
                      .read_text())["images"] == 6
    shutil.rmtree(home / "runs", ignore_errors=True)
