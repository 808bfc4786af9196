"""The slurm backend: one run is one Slurm job of node_count x process_count_per_node tasks (one rank
per task), submitted through submitit; a sweep is one job array."""
