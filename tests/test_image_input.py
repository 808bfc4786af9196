"""Train PyTorch Model's input paths (mltrain.components.image_input) on a small folder of real-size JPEGs, on
the CPU: the CPU path's batches are the same for a seed, its reduced decode gives the output's size, the GPU
path's batched decode and transforms run here on CPU tensors; trainer.input=gpu without a GPU is refused
before anything starts, and a run records the path it took."""
from __future__ import annotations

from pathlib import Path

import pytest
from jpeg_support import write_jpegs
from support import leftovers, metric_rows, only_run, run_mltrain

torch = pytest.importorskip("torch")

from omegaconf import OmegaConf  # noqa: E402
from PIL import Image  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402
from torchvision.transforms.functional import pil_to_tensor  # noqa: E402

from mltrain.components import crops, image_cpu  # noqa: E402
from mltrain.components import image_input as ii  # noqa: E402
from mltrain.components.image_augment import Augmentation  # noqa: E402


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    root = tmp_path_factory.mktemp("photos")
    return write_jpegs(root / "train", per_class=4), write_jpegs(root / "val", per_class=2, seed=1)


def cfg(**trainer):
    return OmegaConf.create({"trainer": {"input": "auto", **trainer},
                             "data": {"min_crop_scale": 0.08, "horizontal_flip": True, "image_size": 64}})


def first_batches(photos, workers: int, seed: int = 7):
    train, val = ImageFolder(str(photos[0])), ImageFolder(str(photos[1]))
    inp = ii.for_trainer(cfg(), torch.device("cpu"), train, val, None, None, 64, 64)
    assert inp.name == "cpu"
    torch.manual_seed(seed)
    loader = DataLoader(inp.train, batch_size=4, shuffle=True, collate_fn=inp.collate,
                        **ii.loader_settings(workers, cuda=False))
    got = []
    for i, batch in enumerate(loader):
        got.append(inp.prepare_train(batch))
        if i == 1:
            break
    return got


@pytest.mark.parametrize("workers", [0, 2])
def test_cpu_path_same_seed_gives_identical_first_batches(photos, workers):
    first, second = first_batches(photos, workers), first_batches(photos, workers)
    for (a, la), (b, lb) in zip(first, second):
        assert torch.equal(a, b) and torch.equal(la, lb)
        assert a.shape == (4, 3, 64, 64) and a.dtype == torch.float32
    assert not torch.equal(first_batches(photos, workers, seed=8)[0][0], first[0][0])


def test_reduced_decode_gives_the_output_size_and_the_full_decode_s_picture(photos):
    path = str(next(Path(photos[0]).rglob("*.jpg")))
    with Image.open(path) as image:
        assert image.size == (800, 600)
        assert image_cpu.draft(image, 200, 150) == 4  # a quarter of each side still covers 200 x 150
        assert image.size == (200, 150)
    with Image.open(path) as image:
        assert image_cpu.draft(image, 500, 400) == 1  # no reduction leaves 500 x 400 covered
    for training in (True, False):
        aug = Augmentation(size=64, training=training, min_crop_scale=0.08, flip=False)
        torch.manual_seed(0)
        reduced = image_cpu.decode_cpu(path, aug)
        assert reduced.shape == (3, 64, 64) and reduced.dtype == torch.uint8
        # the reference: torchvision's transforms on the full-size decode, the same random draws
        from torchvision import transforms as T

        ref = T.Compose([T.RandomResizedCrop(64, scale=(0.08, 1.0)) if training else
                         T.Compose([T.Resize(73), T.CenterCrop(64)]), T.PILToTensor()])
        torch.manual_seed(0)
        full = ref(Image.open(path).convert("RGB"))
        assert (reduced.float() - full.float()).abs().mean() < 4.0  # of 255: the same region, resampled
    # an attached transformation starting with a Resize decodes reduced too, to its own output size
    aug = Augmentation(size=32, training=True, ops=(("Resize", 40), ("CenterCrop", 32), ("RandomHorizontalFlip",)))
    assert aug.first_resize() == 40
    assert image_cpu.decode_cpu(path, aug).shape == (3, 32, 32)


def test_a_png_is_decoded_whole_and_a_corrupt_jpeg_is_named(tmp_path, photos):
    png = tmp_path / "x.png"
    Image.open(next(Path(photos[0]).rglob("*.jpg"))).save(png)
    with Image.open(png) as image:
        assert image_cpu.draft(image, 100, 75) == 1
    assert image_cpu.decode_cpu(str(png), Augmentation(size=48, training=False)).shape == (3, 48, 48)
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    from mltrain.components.designer_errors import InvalidDatasetError

    with pytest.raises(InvalidDatasetError, match="bad.jpg"):
        image_cpu.decode_cpu(str(bad), Augmentation(size=48, training=True))


def test_full_size_decode_matches_torchvision_s_recipe_and_odd_jpegs_still_decode(tmp_path):
    """A JPEG too small for a reduced decode goes through torchvision's decoder and torch's resampling: the same
    crop, flip and picture as the reference recipe (PIL) for a seed, to within a fraction of a grey level; a CMYK
    JPEG and a greyscale one decode to RGB; a truncated JPEG is named, not decoded half grey."""
    from torchvision import transforms as T

    from mltrain.components.designer_errors import InvalidDatasetError

    folder = write_jpegs(tmp_path / "small", classes=(0,), per_class=3, size=(300, 200), seed=5)
    ref = T.Compose([T.RandomResizedCrop(160, scale=(0.08, 1.0)), T.RandomHorizontalFlip(), T.PILToTensor()])
    aug = Augmentation(size=160, training=True, min_crop_scale=0.08, flip=True)
    for n, path in enumerate(sorted(str(p) for p in folder.rglob("*.jpg"))):
        torch.manual_seed(n)
        got = image_cpu.decode_cpu(path, aug)
        torch.manual_seed(n)
        want = ref(Image.open(path).convert("RGB"))
        assert got.shape == want.shape == (3, 160, 160) and got.dtype == torch.uint8
        assert (got.float() - want.float()).abs().mean() < 0.5
    rgb = Image.open(next(folder.rglob("*.jpg"))).convert("RGB")
    rgb.convert("CMYK").save(tmp_path / "cmyk.jpg", quality=95)
    rgb.convert("L").save(tmp_path / "grey.jpg", quality=95)
    for name in ("cmyk.jpg", "grey.jpg"):
        out = image_cpu.decode_cpu(str(tmp_path / name), Augmentation(size=64, training=False))
        assert out.shape == (3, 64, 64) and out.float().std() > 5
    whole = (tmp_path / "grey.jpg").read_bytes()
    (tmp_path / "cut.jpg").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(InvalidDatasetError, match="cut.jpg"):
        image_cpu.decode_cpu(str(tmp_path / "cut.jpg"), Augmentation(size=64, training=True))


@pytest.mark.parametrize("training", [True, False])
def test_the_cpu_path_gives_the_reference_recipe_s_batches_for_a_seed(tmp_path, training):
    """What the trainer ran before trainer.input (torchvision's recipe: PIL, RandomResizedCrop, flip, ToTensor,
    Normalize in the workers) and the CPU path, each loading the same folder from the same seed: the same images
    in the same order with the same labels, the same crops and flips, to within a fraction of a grey level."""
    from mltrain.components import data

    folder = write_jpegs(tmp_path / "photos", per_class=6, size=(300, 200), seed=3)
    settings = cfg()
    settings.data.image_size = 160
    reference = ImageFolder(str(folder), transform=data.transforms(settings, train=training), loader=data.load_image)
    plain = ImageFolder(str(folder))
    inp = ii.for_trainer(settings, torch.device("cpu"), plain, plain, None, None, 160, 160)
    ours = inp.train if training else inp.val
    prepare = inp.prepare_train if training else inp.prepare_val

    def batches(dataset, step):
        torch.manual_seed(11)
        return [tuple(t.clone() for t in step(b)) for b in DataLoader(dataset, batch_size=4, shuffle=True, num_workers=0)]

    got, want = batches(ours, prepare), batches(reference, lambda b: b)
    assert len(got) == len(want) == 3
    for (images, labels), (ref_images, ref_labels) in zip(got, want):
        assert torch.equal(labels, ref_labels) and images.shape == ref_images.shape == (4, 3, 160, 160)
        # normalised units: a grey level is about 1/57 of one
        assert float((images - ref_images).abs().mean()) < 0.5 / 57, float((images - ref_images).abs().mean())


def test_the_cpu_normalizer_gives_imagenet_statistics_into_a_buffer_kept_per_shape():
    x = torch.randint(0, 256, (4, 3, 8, 8), dtype=torch.uint8)
    want = (x.float() / 255 - torch.tensor(ii.MEAN).view(1, 3, 1, 1)) / torch.tensor(ii.STD).view(1, 3, 1, 1)
    norm = ii.Normalizer(torch.device("cpu"))
    got = norm(x)
    assert got.dtype == torch.float32 and torch.allclose(got, want, atol=1e-5)
    again = norm(x.flip(0))  # the next batch of the same shape: the same memory, the new values
    assert again.data_ptr() == got.data_ptr() and torch.allclose(again, want.flip(0), atol=1e-5)
    assert torch.allclose(norm(x[:2].float()), want[:2], atol=1e-5)  # a short last batch, or floats 0..255


def test_gpu_path_batched_decode_and_transforms_on_cpu_tensors(photos):
    """The GPU path's code with device=cpu: the same seed gives the same batch, and the same crops as the CPU path."""
    train = ImageFolder(str(photos[0]))
    encoded = [ii.FileBytes(train.samples, train.classes)[i][0] for i in range(len(train))]
    aug = Augmentation(size=64, training=True, min_crop_scale=0.08, flip=True)
    decoder = ii.DeviceDecoder(train.samples, aug, torch.device("cpu"))
    batches = []
    for _ in range(2):
        torch.manual_seed(3)
        batches.append(decoder(encoded, torch.arange(len(encoded))))
    assert torch.equal(batches[0], batches[1]) and batches[0].shape == (len(encoded), 3, 64, 64)
    torch.manual_seed(4)
    assert not torch.equal(decoder(encoded, torch.arange(len(encoded))), batches[0])
    # a region resampled as the CPU path resamples it (PIL's bilinear resize of the crop)
    boxes = [[0, 0, 800, 600], [100, 50, 400, 450], [700, 500, 760, 560], [10, 20, 650, 300]]
    got = decoder._resample(decoder.decode(encoded[:4], torch.arange(4)), boxes)
    ref = torch.stack([pil_to_tensor(Image.open(path).convert("RGB").crop(tuple(box)).resize((64, 64), Image.Resampling.BILINEAR))
                       for (path, _), box in zip(train.samples, boxes)])
    assert (got - ref.float()).abs().mean() < 4.0, (got - ref.float()).abs().mean()
    val_aug = Augmentation(size=64, training=False)
    val = ii.DeviceDecoder(train.samples, val_aug, torch.device("cpu"))(encoded, torch.arange(len(encoded)))
    assert val.shape == (len(encoded), 3, 64, 64)
    cpu_val = torch.stack([image_cpu.decode_cpu(path, val_aug) for path, _ in train.samples])
    assert (val - cpu_val.float()).abs().mean() < 4.0  # resize 73 + center crop 64, as a region of the original
    normalized = ii.Normalizer(torch.device("cpu"))(batches[0])
    assert normalized.dtype == torch.float32 and abs(float(normalized.mean())) < 3


def test_gpu_path_one_buffer_per_batch_and_images_of_different_sizes(photos, tmp_path):
    """The workers hand a batch over as one buffer of every file's bytes; images of different sizes are resampled
    together (padded with their own edges) to the crops each would get alone, with no dark border."""
    write_jpegs(tmp_path / "small", classes=(0,), per_class=2, size=(300, 200), seed=2)
    big, small = ImageFolder(str(photos[0])).samples[:3], ImageFolder(str(tmp_path / "small")).samples
    samples = big + small
    loader = DataLoader(ii.FileBytes(samples, ["a"]), batch_size=len(samples), collate_fn=ii.collate_bytes, num_workers=1)
    flat, lengths, labels, indices = next(iter(loader))
    encoded = ii.split_bytes(flat, lengths)
    assert flat.dim() == 1 and [len(e) for e in encoded] == [Path(p).stat().st_size for p, _ in samples]
    assert bytes(encoded[4].numpy()) == Path(samples[4][0]).read_bytes() and indices.tolist() == list(range(5))
    for training in (True, False):
        aug = Augmentation(size=64, training=training, min_crop_scale=0.08, flip=False)
        decoder = ii.DeviceDecoder(samples, aug, torch.device("cpu"))
        images = decoder.decode(encoded, indices)
        boxes, _ = decoder.boxes(images)
        together = decoder._resample(images, boxes)
        alone = torch.cat([decoder._resample([image], [box]) for image, box in zip(images, boxes)])
        assert together.shape == (5, 3, 64, 64) and decoder(encoded, indices).shape == (5, 3, 64, 64)
        assert torch.allclose(together, alone, atol=1e-3), (together - alone).abs().max()
        assert float(together[3:, :, -1, :].mean()) > 0.5 * float(together[3:].mean())  # the last row is not black


def test_batched_crop_draws_follow_random_resized_crop():
    """The GPU path draws a batch's crops at once: the same distribution as torchvision's RandomResizedCrop, its
    fallback included (a narrow strip where few draws fit), every crop inside its image."""
    from torchvision import transforms as T

    for size, tolerance in (((350, 400), 0.02), ((600, 80), 0.03)):
        torch.manual_seed(0)
        ours = torch.tensor(crops.draw_crops([size] * 4000, (0.08, 1.0)), dtype=torch.float64)
        torch.manual_seed(1)
        ref = torch.tensor([T.RandomResizedCrop.get_params(torch.empty(1, *size), [0.08, 1.0], list(crops.RATIO))
                            for _ in range(4000)], dtype=torch.float64)
        for drawn in (ours, ref):
            top, left, h, w = drawn.unbind(1)
            assert bool(((top >= 0) & (left >= 0) & (top + h <= size[0]) & (left + w <= size[1]) & (h > 0) & (w > 0)).all())

        def stats(c, size=size):
            top, left, h, w = c.unbind(1)
            return torch.stack([(h * w).mean() / (size[0] * size[1]), (w / h).log().mean(), (top / (size[0] - h + 1)).mean(),
                                (left / (size[1] - w + 1)).mean(), (h == size[0]).double().mean()])

        assert torch.allclose(stats(ours), stats(ref), atol=tolerance), (size, stats(ours), stats(ref))
    torch.manual_seed(2)
    first = crops.draw_crops([(350, 400)] * 8, (0.08, 1.0))
    torch.manual_seed(2)
    assert crops.draw_crops([(350, 400)] * 8, (0.08, 1.0)) == first and crops.draw_crops([], (0.08, 1.0)) == []


def test_input_choice():
    cpu, cuda = torch.device("cpu"), torch.device("cuda", 0)
    assert ii.resolve("auto", cpu, True)[0] == "cpu"
    assert ii.resolve("auto", cuda, True)[0] == "gpu"
    assert ii.resolve("auto", cuda, False)[0] == "cpu"
    assert ii.resolve("cpu", cuda, True)[0] == "cpu"
    from mltrain.base.errors import ConfigError

    with pytest.raises(ConfigError, match="trainer.input"):
        ii.resolve("gpu", cpu, True)


@pytest.mark.slow
def test_gpu_input_without_a_gpu_is_refused_in_one_line(home, project):
    r = run_mltrain("trainer.input=gpu", cwd=project, env={"CUDA_VISIBLE_DEVICES": ""})
    assert r.rc != 0 and "trainer.input" in r.err and "GPU" in r.err
    assert len(r.err.strip().splitlines()) == 1 and leftovers(home) == []


@pytest.mark.slow
def test_a_run_on_jpegs_records_the_cpu_path(home, project, photos):
    r = run_mltrain("data=image_directory", f"data.train_dir={photos[0]}", f"data.val_dir={photos[1]}",
                    "data.num_workers=2", "data.image_size=32", "trainer.epochs=1", "trainer.batch_size=4",
                    cwd=project, timeout=300)
    assert r.rc == 0, r.out[-3000:] + r.err
    run = only_run(home)
    assert "input: cpu path (auto: no GPU" in (Path(run["dir"]) / "logs" / "rank_0.log").read_text()
    rows = metric_rows(run["dir"])
    assert [x["value"] for x in rows if x["name"] == "input_pipeline"] == ["cpu"]
    assert [x["name"] for x in rows if x["name"] == "train_images_per_second"] == ["train_images_per_second"]
    shown = run_mltrain("runs", "show", run["id"], cwd=project)
    assert shown.rc == 0 and "  input_pipeline: cpu" in shown.out.splitlines(), shown.out
