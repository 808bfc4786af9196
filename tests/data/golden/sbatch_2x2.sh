MASTER_ADDR is the first node of the allocation; MASTER_PORT is derived from the Slurm job id
submitit parameters: {'nodes': 2, 'tasks_per_node': 2, 'cpus_per_task': 2, 'timeout_min': 30, 'name': 'exp', 'slurm_signal_delay_s': 90, 'slurm_srun_args': ['--kill-on-bad-exit=1'], 'slurm_partition': 'debug'}
sbatch script:
  #!/bin/bash
  
  # Parameters
  #SBATCH --cpus-per-task=2
  #SBATCH --error=/runs/r1/submitit/%j_0_log.err
  #SBATCH --job-name=exp
  #SBATCH --nodes=2
  #SBATCH --ntasks-per-node=2
  #SBATCH --open-mode=append
  #SBATCH --output=/runs/r1/submitit/%j_0_log.out
  #SBATCH --partition=debug
  #SBATCH --signal=USR2@90
  #SBATCH --time=30
  #SBATCH --wckey=submitit
  
  # command
  export SUBMITIT_EXECUTOR=slurm
  srun --unbuffered --output /runs/r1/submitit/%j_%t_log.out --error /runs/r1/submitit/%j_%t_log.err --kill-on-bad-exit=1 <python> -u <task_main.py> -u -m submitit.core._submit /runs/r1/submitit
