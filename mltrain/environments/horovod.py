"""Horovod built against the torch an environment runs (`mltrain horovod build|check`).

Horovod's last release, 0.28.1 (2023), ships no wheels and its sdist does not build against today's
torch as it is; two build files need changing, and nothing else:

- torch >= 2.1 headers need a newer C++ than the C++14 Horovod asks for (torch 2.15's say "C++20 or
  later compatible compiler is required"): both `CMAKE_CXX_STANDARD 14` lines become 20 (horovod
  PR #3998, unreleased, moved to 17 for torch 2.1);
- its cmake/Modules/FindPytorch.cmake takes a CUDA build of torch plus any CUDA_HOME for a usable CUDA
  toolkit; a machine with torch's CUDA wheels but no toolkit (no cudart) then fails with `Could NOT
  find CUDAToolkit`. A CPU build forces `Pytorch_CUDA` off; GPU operations (NCCL) are built only where
  nvcc, cudart and nccl.h are found.

The wheel is cached under $MLTRAIN_HOME/wheels/horovod/<horovod>-torch<torch>-<python tag>/, so it is
rebuilt only when one of the three changes. Nothing here imports torch: the environment's own
interpreter is asked in a subprocess.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

from mltrain.base.atomic import atomic_write
from mltrain.base.errors import MltrainError
from mltrain.base.home import mltrain_home

VERSION = "0.28.1"
BUILD_FILE = "mltrain_horovod_build.json"
CPU_ENV = {
    "HOROVOD_WITH_PYTORCH": "1", "HOROVOD_WITH_MPI": "1", "HOROVOD_WITHOUT_GLOO": "1",
    "HOROVOD_CPU_OPERATIONS": "MPI", "HOROVOD_WITHOUT_TENSORFLOW": "1", "HOROVOD_WITHOUT_MXNET": "1",
}
# What the environment's interpreter says about itself and its torch.
_PROBE = ("import json, sys; import torch; "
          "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, "
          "'python': 'cp%d%d' % sys.version_info[:2]}))")
# What an installed Horovod says about itself (run in the environment: it loads torch).
_CHECK = ("import json, importlib.metadata as m; import torch; import horovod.torch as hvd; "
          "print(json.dumps({'horovod': m.version('horovod'), 'torch': torch.__version__, "
          "'mpi': bool(hvd.mpi_built()), 'nccl': bool(hvd.nccl_built())}))")


def _run(argv: List[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, **kwargs)


def probe(interpreter: str) -> Dict[str, str]:
    out = _run([interpreter, "-c", _PROBE], timeout=300)
    if out.returncode != 0:
        raise MltrainError(f"{interpreter} cannot import torch, which Horovod is built against: "
                           f"{(out.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(out.stdout)


def missing_prerequisites() -> List[str]:
    """What building Horovod needs and this machine lacks, each with how to get it."""
    problems = []
    if not (shutil.which("c++") or shutil.which("g++")):
        problems.append("a C++ compiler (apt-get install g++)")
    if not shutil.which("cmake"):
        problems.append("CMake (apt-get install cmake, or pip install cmake)")
    if not shutil.which("mpicxx") or not _mpi_header():
        problems.append("MPI headers and mpicxx (apt-get install libopenmpi-dev)")
    return problems


def _mpi_header() -> bool:
    out = _run(["mpicxx", "--showme:incdirs"], timeout=30) if shutil.which("mpicxx") else None
    dirs = (out.stdout.split() if out and out.returncode == 0 else []) + ["/usr/include"]
    return any(glob.glob(os.path.join(d, "**", "mpi.h"), recursive=True) for d in dirs)


def gpu_operations() -> Optional[str]:
    """NCCL when a usable CUDA toolkit and NCCL exist here, else None (CPU operations over MPI only)."""
    nvcc = shutil.which("nvcc") or (os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc")
                                    if os.environ.get("CUDA_HOME") else None)
    if not nvcc or not os.path.exists(nvcc):
        return None
    home = Path(nvcc).resolve().parent.parent
    cudart = glob.glob(str(home / "lib*" / "libcudart.so*")) or glob.glob(str(home / "targets" / "*" / "lib" / "libcudart.so*"))
    nccl = glob.glob("/usr/include/nccl.h") + glob.glob(str(home / "include" / "nccl.h"))
    return "NCCL" if cudart and nccl else None


def cache_dir(info: Dict[str, str]) -> Path:
    return mltrain_home() / "wheels" / "horovod" / f"{VERSION}-torch{info['torch']}-{info['python']}"


def cached_wheel(info: Dict[str, str]) -> Optional[Path]:
    folder = cache_dir(info)
    wheels = sorted(folder.glob("horovod-*.whl"))
    return wheels[0] if wheels and (folder / BUILD_FILE).is_file() else None


def _patch(source: Path) -> None:
    for rel in ("CMakeLists.txt", "horovod/torch/CMakeLists.txt"):
        path = source / rel
        text = path.read_text()
        if "set(CMAKE_CXX_STANDARD 14)" not in text:
            raise MltrainError(f"Horovod {VERSION}'s {rel} no longer says CMAKE_CXX_STANDARD 14; the build needs review")
        path.write_text(text.replace("set(CMAKE_CXX_STANDARD 14)", "set(CMAKE_CXX_STANDARD 20)"))
    finder = source / "cmake" / "Modules" / "FindPytorch.cmake"
    anchor = 'string(TOUPPER "${Pytorch_CUDA}" Pytorch_CUDA)'
    text = finder.read_text()
    if anchor not in text:
        raise MltrainError(f"Horovod {VERSION}'s FindPytorch.cmake changed; the build needs review")
    finder.write_text(text.replace(anchor, anchor + "\nif(NOT DEFINED ENV{HOROVOD_GPU_OPERATIONS})\n"
                                   "    set(Pytorch_CUDA FALSE)\nendif()", 1))


def build(interpreter: str = sys.executable, log: Callable[[str], None] = print, force: bool = False) -> Path:
    """The Horovod wheel for this interpreter's torch, from the cache or built now."""
    info = probe(interpreter)
    wheel = None if force else cached_wheel(info)
    if wheel is not None:
        log(f"Horovod {VERSION} for torch {info['torch']} ({info['python']}): cached {wheel}")
        return wheel
    problems = missing_prerequisites()
    if problems:
        raise MltrainError("building Horovod needs " + "; ".join(problems))
    gpu = gpu_operations()
    env = {**os.environ, **CPU_ENV}
    if gpu:
        env["HOROVOD_GPU_OPERATIONS"] = gpu
    started = time.monotonic()
    log(f"building Horovod {VERSION} for torch {info['torch']} ({info['python']}): CPU operations over MPI"
        + (f", GPU operations over {gpu}" if gpu else "") + "; a few minutes on 2 cores")
    with tempfile.TemporaryDirectory(prefix="mltrain-horovod-") as tmp:
        work = Path(tmp)
        got = _run([interpreter, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "-q",
                    f"horovod=={VERSION}", "-d", str(work)], timeout=600)
        sdists = list(work.glob("horovod-*.tar.gz"))
        if got.returncode != 0 or not sdists:
            raise MltrainError(f"cannot download Horovod {VERSION}'s source: {got.stderr.strip()[-300:]}")
        with tarfile.open(sdists[0]) as tar:
            tar.extractall(work, filter="data")
        source = work / f"horovod-{VERSION}"
        _patch(source)
        out = work / "wheel"
        built = _run([interpreter, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", str(out),
                      str(source)], env=env, timeout=3600)
        wheels = list(out.glob("horovod-*.whl"))
        if built.returncode != 0 or not wheels:
            log_path = mltrain_home() / "wheels" / "horovod" / "last-build.log"
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log_path.write_text(built.stdout + built.stderr)
            raise MltrainError(f"Horovod {VERSION} did not build (log: {log_path})")
        folder = cache_dir(info)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / wheels[0].name
        shutil.copyfile(wheels[0], str(target) + ".tmp")
        os.replace(str(target) + ".tmp", target)
        seconds = time.monotonic() - started
        atomic_write(folder / BUILD_FILE, json.dumps({**info, "horovod": VERSION, "cpu_operations": "MPI",
                                                      "gpu_operations": gpu, "build_seconds": round(seconds, 1)}))
    log(f"built {target} in {seconds:.0f}s")
    return target


def install(interpreter: str, wheel: Path) -> None:
    # --no-deps for torch: Horovod must never pull another torch; its small runtime needs come along.
    for args in (["--no-deps", "--force-reinstall", str(wheel)], ["psutil", "cloudpickle", "pyyaml", "packaging"]):
        out = _run([interpreter, "-m", "pip", "install", "-q", *args], timeout=600)
        if out.returncode != 0:
            raise MltrainError(f"installing {args[-1]} failed: {out.stderr.strip()[-300:]}")


def check(interpreter: str = sys.executable) -> Dict[str, object]:
    """What the installed Horovod was built with; MltrainError saying what is wrong, in one line."""
    out = _run([interpreter, "-c", _CHECK], timeout=300)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        if "No module named 'horovod'" in last:
            raise MltrainError("Horovod is not installed; build and install it with `mltrain horovod build`")
        if "undefined symbol" in last or "torch" in last.lower():
            raise MltrainError(f"Horovod does not load with this torch ({last}); it was built for another torch: "
                               "rebuild with `mltrain horovod build --force`")
        raise MltrainError(f"Horovod does not load: {last}")
    info = json.loads(out.stdout)
    if not info["mpi"]:
        raise MltrainError("the installed Horovod was built without MPI; rebuild with `mltrain horovod build --force`")
    return info


def require(interpreter: str) -> Dict[str, object]:
    """check(), remembered per interpreter until its Horovod or torch installation changes: the check
    loads torch, which no submission should pay for twice."""
    key_parts = []
    for name in ("horovod", "torch"):
        found = _run([interpreter, "-c", f"import importlib.util as u; s = u.find_spec({name!r}); "
                      "print(s.origin if s else '')"], timeout=60).stdout.strip()
        if not found:
            raise MltrainError("Horovod is not installed; build and install it with `mltrain horovod build`"
                               if name == "horovod" else f"{interpreter} has no torch")
        key_parts.append(f"{found}:{os.stat(os.path.dirname(found)).st_mtime_ns}")
    cache = mltrain_home() / "cache" / "horovod-check.json"
    key = f"{interpreter}|{'|'.join(key_parts)}"
    try:
        known = json.loads(cache.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    info = check(interpreter)
    cache.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(cache, json.dumps({key: info}))
    return info
