"""The Designer's ImageDirectory on disk: torchvision's ImageFolder layout plus one small metadata file.

A labelled directory holds one folder per label (`<dir>/<label>/<images>`, what ImageFolder reads); an
unlabelled one holds its images at the top, no label folders. Either way `image_directory.json` at the top
says which it is and holds the class names, counts per class, a content digest and, once Apply Image
Transformation has run, the image transformation the images are to be read through. Azure keeps the same
facts in its ImageDirectory's `_meta.yaml`; ImageFolder ignores files at the top, so the layout stays one
torchvision reads as it is.

No torch here: the driver reads this file in its checks before anything is queued.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from mltrain.base.atomic import atomic_write
from mltrain.components.checks import IMAGE_DIRECTORY_META, IMG_EXTENSIONS

META_FILE = IMAGE_DIRECTORY_META
FORMAT = "mltrain.image_directory"
VERSION = 1


def is_image_name(name: str) -> bool:
    """Azure's rule for Convert to Image Directory: the extensions torchvision reads, in any case."""
    return os.path.splitext(name)[1].lower() in IMG_EXTENSIONS


def read_meta(directory: Any) -> Optional[Dict[str, Any]]:
    """The metadata of an image directory, or None for a plain folder (an ImageFolder made by hand)."""
    path = Path(str(directory)).expanduser() / META_FILE
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("format") == FORMAT else None


def images_of(root: Path) -> Iterator[Tuple[str, Path]]:
    """(path relative to root, path) of every image under root, sorted, hidden entries left out."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith(".") and is_image_name(name):
                path = Path(dirpath) / name
                yield path.relative_to(root).as_posix(), path


def label_of(relative: str) -> Optional[str]:
    """An image's label in the ImageFolder layout: its first folder; None for an image at the top."""
    head, sep, _ = relative.partition("/")
    return head if sep else None


def labelled(directory: Path) -> bool:
    """Whether a directory is labelled: its metadata says so, or (made by hand) every image sits in a folder."""
    meta = read_meta(directory)
    if meta is not None:
        return bool(meta.get("labelled"))
    found = [label_of(rel) for rel, _ in images_of(directory)]
    return bool(found) and None not in found


def content_digest(entries: List[Tuple[str, str]]) -> str:
    """One digest of a directory's images: their relative paths and content digests, in path order."""
    h = hashlib.sha256()
    for relative, digest in sorted(entries):
        h.update(f"{relative}\0{digest}\n".encode())
    return "sha256:" + h.hexdigest()


def describe(entries: List[Tuple[str, str]], **extra: Any) -> Dict[str, Any]:
    """The metadata of a directory holding `entries` ((relative path, sha256) of each image)."""
    labels = [label_of(rel) for rel, _ in entries]
    is_labelled = bool(entries) and None not in labels
    counts: Dict[str, int] = {}
    for label in labels:
        if label is not None:
            counts[label] = counts.get(label, 0) + 1
    meta: Dict[str, Any] = {"format": FORMAT, "version": VERSION, "labelled": is_labelled,
                            "classes": sorted(counts) if is_labelled else [],
                            "counts": dict(sorted(counts.items())) if is_labelled else {},
                            "images": len(entries), "digest": content_digest(entries)}
    meta.update(extra)
    return meta


def write_meta(directory: Path, meta: Dict[str, Any]) -> None:
    atomic_write(directory / META_FILE, json.dumps(meta, indent=2, sort_keys=True) + "\n")


# ------------------------------------------------------------------------ writing a directory whole
def staging(output: Path) -> Path:
    """A fresh folder beside `output` to build it in; `publish` renames it into place, so a reader (the next
    step, a requeued job) never sees half a directory."""
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    return tmp


def publish(tmp: Path, output: Path) -> None:
    if output.is_symlink() or output.is_file():
        output.unlink()
    elif output.exists():
        shutil.rmtree(output)
    os.replace(tmp, output)


def discard(tmp: Path) -> None:
    shutil.rmtree(tmp, ignore_errors=True)


#: How Apply Image Transformation and Split Image Directory place an input image in their output.
LINK_MODES = ("hardlink", "symlink", "copy")


def place(source: Path, target: Path, mode: str) -> str:
    """Link (or copy) one image into an output; returns what was done. A hard link shares the bytes and
    outlives the upstream run's folder; a symlink is also cheap across file systems but breaks when the
    upstream output is deleted; a copy is the fallback where the file system refuses a link."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if mode == "hardlink":
        try:
            os.link(source, target)
            return "hardlink"
        except OSError:
            pass  # another file system, or one without hard links
    elif mode == "symlink":
        try:
            os.symlink(os.path.realpath(source), target)
            return "symlink"
        except OSError:
            pass
    shutil.copyfile(source, target)
    return "copy"
