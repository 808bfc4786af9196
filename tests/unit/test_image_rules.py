"""The image pipeline's pure rules, without processes: archive member names, where labels start, the
transformation spec by mode, the split, the metrics, and the built-in component table."""
import pytest

from mltrain.base.errors import ConfigError
from mltrain.components import builtin
from mltrain.components import image_transformation as transformation
from mltrain.components.convert_to_image_directory import common_base
from mltrain.components.evaluate_model import metrics
from mltrain.components.image_sources import checked_parts, suffix_of
from mltrain.components.split_image_directory import choose
from mltrain.jobspec.kinds import JOB_KINDS


@pytest.mark.parametrize("name, reason", [
    ("../evil.jpg", "'..' in path"), ("a/../../b.jpg", "'..' in path"), ("/etc/x.jpg", "absolute path"),
    ("C:\\Windows\\x.jpg", "absolute path"), ("__MACOSX/a/._b.jpg", "__MACOSX"), ("a/.hidden/b.jpg", "hidden file"),
    ("a/.DS_Store", "hidden file"), ("", "unusable name"),
])
def test_unsafe_or_junk_member_names_are_refused_never_rewritten(name, reason):
    assert checked_parts(name) == ((), reason)


def test_usable_member_names_keep_their_folders():
    assert checked_parts("train/056.dog/x.jpg") == (("train", "056.dog", "x.jpg"), None)
    assert checked_parts("./a\\b.png") == (("a", "b.png"), None)


@pytest.mark.parametrize("paths, base", [
    ([("train", "dog", "1.jpg"), ("train", "cat", "2.jpg")], ("train",)),        # a wrapping folder comes off
    ([("a", "b", "dog", "1.jpg"), ("a", "b", "cat", "x", "2.jpg")], ("a", "b")),
    ([("photos", "1.jpg"), ("photos", "2.jpg")], ()),                            # one folder of images: one label
    ([("1.jpg",), ("2.jpg",)], ()),                                                # images at the top: unlabelled
    ([("dog", "1.jpg"), ("2.jpg",)], ()),
])
def test_labels_start_below_the_folders_that_wrap_everything(paths, base):
    assert common_base(paths) == base


def test_archive_suffixes():
    from pathlib import Path

    assert [suffix_of(Path(n)) for n in ("a.TAR.GZ", "a.tgz", "a.tar.bz2", "a.jpg.gz", "a.zip", "t.tsv")] == [
        ".tar.gz", ".tgz", ".tar.bz2", ".gz", ".zip", ".tsv"]


def test_designer_parameters_become_operations_in_azures_order_and_inference_drops_the_random_ones():
    ops = transformation.from_parameters({"random_horizontal_flip": True, "resize": True, "size": 64, "center_crop": True,
                                          "crop_size": 56, "random_rotation": True, "random_rotation_degrees": 15,
                                          "color_jitter": True})
    assert ops == [["Resize", 64], ["CenterCrop", 56], ["ColorJitter"], ["RandomHorizontalFlip"],
                   ["RandomRotation", 15]]
    assert transformation.for_mode(ops, "For inference") == [["Resize", 64], ["CenterCrop", 56]]
    assert transformation.for_mode(ops, "For training") == ops
    assert transformation.output_size(ops) == 56 and transformation.output_size([["Resize", 64]]) is None


def test_a_switched_on_size_must_be_usable():
    with pytest.raises(ConfigError, match=r"job.crop_size: must be an integer >= 1 when center_crop is true"):
        transformation.check_parameters({"center_crop": True, "crop_size": 0})
    transformation.check_parameters({"center_crop": False, "crop_size": 0})


def test_the_split_is_stratified_and_seeded():
    names = [f"{c}/{i}.png" for c in "abc" for i in range(10)]
    labels = [n[0] for n in names]
    first, second, stratified = choose(names, labels, 0.8, 42)
    assert stratified and len(first) == 24 and not set(first) & set(second)
    assert {c: sum(labels[i] == c for i in first) for c in "abc"} == {"a": 8, "b": 8, "c": 8}
    assert choose(names, labels, 0.8, 42) == (first, second, True)
    assert choose(names, labels, 0.8, 1)[0] != first
    assert choose(names, [None] * 30, 0.8, 42)[2] is False
    with pytest.raises(ConfigError, match="leaves one output empty"):
        choose(names[:3], labels[:3], 0.1, 42)


def test_classification_metrics():
    result = metrics(["a", "a", "b", "b"], ["a", "b", "b", "b"])
    assert result["accuracy"] == 0.75 and result["confusion_matrix"]["matrix"] == [[1, 1], [0, 2]]
    assert result["per_class"]["a"] == {"precision": 1.0, "recall": 0.5, "f1": pytest.approx(2 / 3), "support": 2}
    assert result["macro"]["recall"] == 0.75 and result["weighted"]["precision"] == pytest.approx((1 + 2 / 3) / 2)


@pytest.mark.parametrize("reference", [
    "convert_to_image_directory", "azureml:convert_to_image_directory@latest", "azureml:convert_to_image_directory:3",
    "azureml://registries/azureml/components/convert_to_image_directory/versions/0.0.1",
    "azureml://registries/azureml/components/convert_to_image_directory/labels/latest",
])
def test_builtin_components_resolve_from_every_reference_form(reference):
    assert builtin.resolve(reference).job == "convert_to_image_directory"


def test_every_builtin_component_is_a_registered_job_kind_and_its_keys_exist():
    import dataclasses

    from mltrain.jobspec.job_schemas import DataConf, TrainerConf

    names = {"convert_to_image_directory", "init_image_transformation", "apply_image_transformation",
             "split_image_directory", "train_pytorch_model", "score_image_model", "evaluate_model"}
    assert set(builtin.COMPONENTS) == names
    for component in builtin.COMPONENTS.values():
        schema = JOB_KINDS[component.job].schema
        fields = {"job": {f.name for f in dataclasses.fields(schema)},
                  "data": {f.name for f in dataclasses.fields(DataConf)},
                  "trainer": {f.name for f in dataclasses.fields(TrainerConf)}}
        keys = [p.key for p in component.inputs + component.outputs if p.key] + [p.key for p in component.parameters]
        for key in keys:
            group, _, name = key.partition(".")
            assert name in fields[group], f"{component.name}: {key}"


def test_a_use_of_a_component_becomes_overrides_and_unknown_names_are_one_line():
    apply = builtin.resolve("azureml:apply_image_transformation@latest")
    assert builtin.overrides(apply, {"input_image_transformation": "/t", "input_image_directory": "/i"},
                             {"output_image_directory": "/o"}, {"mode": "For training"}) == [
        "job=apply_image_transformation", "job.input_transform_path=/t", "job.input_image_path=/i",
        "job.output_path=/o", "job.mode='For training'"]
    train = builtin.resolve("train_pytorch_model")
    assert builtin.overrides(train, {"training_data": "/a", "validation_data": "/b"}, {"trained_model": "/m"},
                             {"epochs": 2})[:2] == ["job=train_pytorch_model", "data=image_directory"]
    with pytest.raises(ConfigError, match=r"component.inputs.images: not an input of Apply Image Transformation"):
        builtin.overrides(apply, {"images": "/i"}, {}, {})
    with pytest.raises(ConfigError, match=r"'azureml:nope@latest' is not a built-in component \(allowed: apply_image"):
        builtin.resolve("azureml:nope@latest")
