"""What each Slurm task runs first: submitit's own task entry (`python -m submitit.core._submit FOLDER`),
started without the numpy import that submitit makes before it unpickles a job (why, and how: the submitit
fence, mltrain.backends.slurm.submitit_internals.run_task_without_numpy).

submitit builds the task's command as `<python> -u -m submitit.core._submit FOLDER`; mltrain sets that
`python` to `<interpreter> -u <this file>` (mltrain.backends.slurm.submission), so the folder is the last
argument here. Only submitit and the standard library are imported before the job runs: the fence, which
imports only the standard library at its top, is loaded from its file beside this one, not as
`mltrain.backends.slurm.submitit_internals` (mltrain's package modules would cost about 40 ms per task).
"""
import os
import sys
from importlib.util import module_from_spec, spec_from_file_location


def main() -> None:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "submitit_internals.py")
    spec = spec_from_file_location("mltrain_submitit_internals", path)
    assert spec is not None and spec.loader is not None
    fence = module_from_spec(spec)
    spec.loader.exec_module(fence)
    fence.run_task_without_numpy(sys.argv[-1])


if __name__ == "__main__":
    main()
