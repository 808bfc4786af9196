"""Azure ML's parallel job (`job=parallel`, v2 `type: parallel`, v1 `ParallelRunStep`), run inside the ranks:
the rank program (program.py), the input cut into mini-batches (inputs.py), the queue of mini-batches in the
run's folder (work_queue.py), each node's agent (agent.py) and its workers, which run the user's entry script
in the job's environment with nothing of mltrain imported (worker.py)."""
