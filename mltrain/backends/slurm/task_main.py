"""What each Slurm task runs first: submitit's own task entry (`python -m submitit.core._submit FOLDER`),
started without the numpy import that submitit makes before it unpickles a job.

submitit.core.submission imports numpy "before loading the pickle, to avoid unexpected interactions";
mltrain's pickled jobs hold no numpy objects (a frozen job is read from the run directory), and numpy's
import cost 0.1 s of every task's start here, on the critical path of every pipeline step and every
sweep member. A pickle that did hold numpy still loads: numpy is imported by the unpickling then.

submitit builds the task's command as `<python> -u -m submitit.core._submit FOLDER`; mltrain sets that
`python` to `<interpreter> -u <this file>` (mltrain.backends.slurm.submission), so the folder is the last
argument here. Only submitit and the standard library are imported before the job runs.
"""
import sys


def main() -> None:
    sys.modules["numpy"] = None  # type: ignore[assignment]  # submitit's `import numpy` then fails, as it allows
    try:
        from submitit.core.submission import process_job  # plugin
    finally:
        del sys.modules["numpy"]  # the job itself may import numpy as usual
    process_job(sys.argv[-1])


if __name__ == "__main__":
    main()
