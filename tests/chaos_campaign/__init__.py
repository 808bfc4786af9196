"""A seeded fault-injection campaign over mltrain's engines (issue 63).

Each trial is drawn from its seed alone: a scenario (a local sweep, a pipeline, a 2-rank DDP run, a parallel
job, an endpoint; on Slurm an array sweep, a packed sweep and a pipeline), a fault (SIGKILL of the driver, of a
rank, of a worker or a server; SIGINT or SIGTERM of the foreground command; slurmctld restarted; the job
requeued) and its moment (after the k-th unit of work has written its marker, plus a delay). Real processes run
the scenario in a folder of its own, the fault is injected, the user's recovery is done (nothing, `runs
resume`, `endpoints restart`), and the invariants are checked on what is left: each unit's work once in the
outputs, the right statuses, `runs list` agreeing with the folders, no process or Slurm job left, no metric lost
or doubled, MLflow's own client opening the store.

`benchmarks/chaos.py --seeds 1-20` runs the campaign; `tests/test_chaos.py` replays a fixed set of seeds in CI.
The seed decides what is done and when; the machine's timing still varies, as in Jepsen: a violation is
replayed with its seed (and usually shows again), and its fix keeps that seed as a regression test.
"""
