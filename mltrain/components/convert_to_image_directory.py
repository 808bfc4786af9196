"""Convert to Image Directory: a folder, an archive or a table of image paths -> a Designer image directory.

Azure's rule for labels is kept: the folder under which images sit names their label (torchvision's
ImageFolder layout), after the folders that wrap everything (`train/056.dog/x.jpg` -> label `056.dog`) are
taken off; a single folder of images is a one-class directory labelled by its name, and images at the top
of the input make an unlabelled directory, which Train PyTorch Model refuses with NotLabeledDatasetError.

Every image is decoded before it is kept (JPEGs at 1/8 scale, which still reads the whole file), so a
corrupt or truncated one is skipped and counted instead of failing a training run hours later. Hidden
files, `__MACOSX`, non-images, links, absolute names and names with `..` are skipped and counted too; two
members with one name keep both (the second renamed) unless their bytes are the same. Nothing is written
outside the output: each image lands at a path built from its checked name, in a folder that is renamed
into place whole at the end.

Run as a job (`mltrain job=convert_to_image_directory job.input_path=photos.zip`) or as Azure's module
(`python -m azureml.designer.modules.computer_vision.preprocess.convert_to_image_directory.
convert_to_image_directory --input-path ... --output-path ...` inside a job's command).
"""
from __future__ import annotations

import hashlib
import io
import multiprocessing
import os
import shutil
from collections import Counter, deque
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from mltrain.base.errors import ConfigError
from mltrain.components import image_directory as imgdir
from mltrain.components.checks import later
from mltrain.components.designer_errors import InvalidDatasetError
from mltrain.components.image_sources import Member, members_of
from mltrain.components.runtime import run_component

OUTPUT = "image_directory"
#: Images larger than this are streamed to disk and checked there instead of in memory.
IN_MEMORY_LIMIT = 64 << 20


def validate(cfg: Any) -> None:
    """The driver's checks before anything is queued (spec.kinds): the input exists."""
    path = cfg.job.input_path
    if path in (None, "", "???"):
        raise ConfigError("job.input_path", "a value is required (a folder, an archive or a table of image paths)")
    if not later(path) and not Path(str(path)).expanduser().exists():
        raise ConfigError("job.input_path", f"'{path}' does not exist")


def readable_image(source: Any) -> bool:
    """Whether Pillow decodes the whole image (bytes or a path). `draft` lets a JPEG decode at 1/8 scale:
    every byte of it is still read, so a truncated file fails here as it would in training."""
    from PIL import Image  # heavy

    try:
        with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as image:
            image.draft("RGB", (1, 1))
            image.load()
        return True
    except Exception:  # Pillow raises many kinds (OSError, SyntaxError, ValueError, DecompressionBombError)
        return False


class _Writer:
    """Writes kept images under `root` at their checked names. Names are decided here, in the input's order
    (so repeated names resolve the same way every time); decoding and writing run in worker processes, in
    batches: Pillow's parsing is Python and holds the GIL (threads ran 2.5x slower than processes here), and
    a bounded number of batches in flight keeps memory flat."""

    def __init__(self, root: Path, batch: int = 64, in_flight: int = 4) -> None:
        self.root = root
        self.written: Dict[Tuple[str, ...], str] = {}
        self.folders: set = set()
        self.failed: set = set()
        self.skipped: Counter = Counter()
        self.examples: Dict[str, str] = {}
        self.renamed = 0
        # forkserver: workers start from a clean process, not a fork of one that may hold threads and locks
        self.pool: Optional[ProcessPoolExecutor] = ProcessPoolExecutor(
            _workers(), mp_context=multiprocessing.get_context("forkserver"))
        self.batch: List[Tuple[bytes, str, Member, Tuple[str, ...]]] = []
        self.batch_size, self.in_flight = batch, in_flight
        self.pending: Deque[Tuple[Optional[Future], List[Tuple[bytes, str]], List[Tuple[Member, Tuple[str, ...]]]]] = deque()

    def skip(self, reason: str, name: str) -> None:
        self.skipped[reason] += 1
        self.examples.setdefault(reason, name)

    def add(self, member: Member) -> None:
        if member.reason:
            return self.skip(member.reason, member.name)
        if not imgdir.is_image_name(member.parts[-1]):
            return self.skip("not an image", member.name)
        try:
            with member.open() as f:
                data = f.read(IN_MEMORY_LIMIT + 1)
                if len(data) > IN_MEMORY_LIMIT:
                    return self._add_large(member, data, f)
        except OSError:
            return self.skip("unreadable file", member.name)
        parts = self._reserve(member, hashlib.sha256(data).hexdigest())
        if parts:
            self.batch.append((data, str(self.root.joinpath(*parts)), member, parts))
            if len(self.batch) >= self.batch_size:
                self._submit()

    def finish(self) -> Dict[Tuple[str, ...], str]:
        """Wait for every image; the kept ones, (checked name -> sha256)."""
        self._submit()
        while self.pending:
            self._collect_one()
        return {p: d for p, d in self.written.items() if p not in self.failed}

    def close(self) -> None:
        for future, _, _ in self.pending:
            if future is not None:
                future.cancel()
        if self.pool is not None:
            self.pool.shutdown(wait=True)

    def _submit(self) -> None:
        if self.batch:
            work = [(data, target) for data, target, _, _ in self.batch]
            future = self.pool.submit(_check_and_write, work) if self.pool is not None else None
            self.pending.append((future, work, [(m, p) for _, _, m, p in self.batch]))
            self.batch = []
        while len(self.pending) > self.in_flight:
            self._collect_one()

    def _collect_one(self) -> None:
        future, work, members = self.pending.popleft()
        try:
            kept = future.result() if future is not None else _check_and_write(work)
        except BrokenProcessPool:
            # A worker could not start (its interpreter cannot re-import this program's main module, as with
            # `python -` or an embedded interpreter): the rest is decoded here, in this process.
            self.pool.shutdown(wait=False)
            self.pool = None
            kept = _check_and_write(work)
        for ok, (member, parts) in zip(kept, members):
            if not ok:
                self.failed.add(parts)  # its name stays taken: names never depend on the workers' timing
                self.skip("corrupt or unreadable image", member.name)

    def _add_large(self, member: Member, head: bytes, rest: Any) -> None:
        spill = self.root.parent / f".{self.root.name}.large"
        digest = hashlib.sha256(head)
        with open(spill, "wb") as out:
            out.write(head)
            for chunk in iter(lambda: rest.read(1 << 20), b""):
                digest.update(chunk)
                out.write(chunk)
        if not readable_image(spill):
            spill.unlink()
            return self.skip("corrupt or unreadable image", member.name)
        parts = self._reserve(member, digest.hexdigest())
        if parts is None:
            spill.unlink()
            return
        target = self.root.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(spill, target)

    def _reserve(self, member: Member, digest: str) -> Optional[Tuple[str, ...]]:
        """The name an image is written under, or None (skipped, and why counted)."""
        parts = member.parts
        if parts in self.written:
            if self.written[parts] == digest:
                self.skip("duplicate (same name and content)", member.name)
                return None
            parts = self._free_name(parts)
            self.renamed += 1
        if parts in self.folders:  # `a.jpg/b.jpg` came first: `a.jpg` cannot be a file too
            self.skip("name clash with a folder", member.name)
            return None
        if any(parts[:i] in self.written for i in range(1, len(parts))):
            self.skip("name clash with a file", member.name)
            return None
        self.written[parts] = digest
        self.folders.update(parts[:i] for i in range(1, len(parts)))
        return parts

    def _free_name(self, parts: Tuple[str, ...]) -> Tuple[str, ...]:
        stem, ext = os.path.splitext(parts[-1])
        n = 2
        while parts[:-1] + (f"{stem}~{n}{ext}",) in self.written:
            n += 1
        return parts[:-1] + (f"{stem}~{n}{ext}",)


def _workers() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 2
    return max(2, min(cores, 8))


def _check_and_write(batch: List[Tuple[bytes, str]]) -> List[bool]:
    """In a worker process: decode each image; write the ones that decode."""
    kept = []
    for data, target in batch:
        ok = readable_image(data)
        if ok:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
        kept.append(ok)
    return kept


def common_base(paths: List[Tuple[str, ...]]) -> Tuple[str, ...]:
    """The folders that wrap every image, as Azure finds its "real base directory": descend while there is
    one folder; when that folder holds the images themselves, it is the one label, so stop above it."""
    folders = [p[:-1] for p in paths]
    base = os.path.commonprefix(folders) if folders else ()
    base = tuple(base)
    if base and all(len(f) == len(base) for f in folders):
        base = base[:-1]
    return base


def convert(input_path: Any, output_path: Any, path_column: Optional[str] = None,
            label_column: Optional[str] = None, log: Callable[[str], None] = print) -> Dict[str, Any]:
    """Build the image directory at output_path (replacing what is there, all at once); returns its metadata."""
    source = Path(str(input_path)).expanduser()
    if not source.exists():
        raise ConfigError("job.input_path", f"'{source}' does not exist")
    output = Path(str(output_path)).expanduser().resolve()
    if output == source.resolve() or source.resolve() in output.parents:
        raise ConfigError("job.output_path", f"'{output}' is inside the input '{source}'; write it elsewhere")
    raw = imgdir.staging(output.with_name(output.name + ".members"))
    built: Optional[Path] = None
    try:
        writer = _Writer(raw)
        try:
            for member in members_of(source, path_column, label_column):
                writer.add(member)
            kept = writer.finish()
        finally:
            writer.close()
        if not kept:
            raise InvalidDatasetError(f"no readable images in '{source}' ({_skipped_text(writer) or 'it is empty'}); "
                                      f"images are {', '.join(e.lstrip('.') for e in imgdir.IMG_EXTENSIONS)}")
        base = common_base(list(kept))
        built = imgdir.staging(output)
        os.rmdir(built)
        os.rename(raw.joinpath(*base), built)  # one rename: the wrapping folders are left behind
        entries = [("/".join(p[len(base):]), d) for p, d in kept.items()]
        if any(len(r.split("/")) > 1 for r, _ in entries):  # labelled: images outside a label folder are out
            for relative in [r for r, _ in entries if "/" not in r]:
                (built / relative).unlink()
                writer.skip("outside any label folder", relative)
            entries = [(r, d) for r, d in entries if "/" in r]
        meta = imgdir.describe(entries, source=source.name, skipped=dict(sorted(writer.skipped.items())),
                               renamed_duplicates=writer.renamed, transform=None)
        imgdir.write_meta(built, meta)
        imgdir.publish(built, output)
        built = None
    finally:
        shutil.rmtree(raw, ignore_errors=True)
        if built is not None:
            imgdir.discard(built)
    kind = f"{len(meta['classes'])} classes ({_counts(meta)})" if meta["labelled"] else "unlabelled"
    log(f"Convert to Image Directory: {meta['images']} images, {kind} -> {output}")
    if writer.skipped or writer.renamed:
        log(f"skipped {sum(writer.skipped.values())}: {_skipped_text(writer) or '-'}; renamed duplicate names: "
            f"{writer.renamed}")
    return meta


def _counts(meta: Dict[str, Any]) -> str:
    items = list(meta["counts"].items())
    text = ", ".join(f"{k}: {v}" for k, v in items[:8])
    return text + (f", ... {len(items) - 8} more" if len(items) > 8 else "")


def _skipped_text(writer: _Writer) -> str:
    return "; ".join(f"{n} {reason} (e.g. '{writer.examples[reason]}')" for reason, n in sorted(writer.skipped.items()))


def body(ctx: Any) -> None:
    if not ctx.is_main:
        return
    job = ctx.cfg.job
    convert(job.input_path, job.output_path or ctx.outputs_dir / OUTPUT, job.path_column, job.label_column)


if __name__ == "__main__":
    run_component(body)
