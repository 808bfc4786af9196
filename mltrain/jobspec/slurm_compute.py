"""The slurm backend's compute schema (`compute=slurm`). It sits in the bottom layer with the job spec
(mltrain.jobspec.computes says why)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from mltrain.jobspec.schema import ComputeConf


@dataclass
class SlurmComputeConf(ComputeConf):
    """A Slurm cluster through submitit: one job = one Slurm job of node_count x process_count_per_node tasks."""

    kind: str = "slurm"
    partition: Optional[str] = None
    # Largest node_count this cluster accepts (Azure's max_nodes); null = no limit checked here.
    max_nodes: Optional[int] = None
    # GPUs on each node (Slurm's --gpus-per-node), all of them seen by every rank of that node; 0 = none asked.
    gpus_per_node: int = 0
    # GPUs for each task (rank), Slurm's --gpus-per-task: Slurm gives every rank its own devices and sets its
    # CUDA_VISIBLE_DEVICES to them; null = not asked (the local compute's key of the same name and meaning).
    # With gpus_per_node too, the two must agree.
    gpus_per_task: Optional[int] = None
    # How Slurm binds the allocation's GPUs to the tasks (srun --gpu-bind): none | closest | single:N |
    # per_task:N | map_gpu:L | mask_gpu:L, optionally after "verbose,"; null = Slurm's default.
    gpu_bind: Optional[str] = None
    cpus_per_task: int = 1
    mem_gb: Optional[float] = None
    timeout_min: int = 60
    account: Optional[str] = None
    qos: Optional[str] = None
    constraint: Optional[str] = None
    # Extra #SBATCH options ({"exclusive": true, "gres": "gpu:a100:4"}) and srun flags.
    additional_parameters: Dict[str, Any] = field(default_factory=dict)
    srun_args: List[str] = field(default_factory=list)
    # How many members of a sweep's job array run at once.
    array_parallelism: int = 256
    # Run a sweep's members inside this many Slurm jobs (workers), each taking the next member when one
    # ends (mltrain.backends.slurm.pack); 0: one Slurm job (array task) per member.
    pack: int = 0
    # Members each packed worker runs at once, each in a slot of its own: the worker asks Slurm for this many
    # times one member's GPUs, CPUs and memory, and pins each slot's member to its share of the worker's GPUs.
    pack_slots: int = 1
    # Seconds before the time limit at which every rank gets the checkpoint signal (USR2).
    signal_delay_s: int = 90
    # Requeues after preemption or timeout before the run is Failed.
    max_requeues: int = 3
    # Times a run whose node was lost (NODE_FAIL) runs again on healthy nodes, from its checkpoints, before it is
    # Failed (mltrain.backends.slurm.node_loss); 0: a lost node fails the run.
    max_node_failures: int = 1
    # How ranks run in environment.docker.base_image: pyxis (srun --container-image) | apptainer (exec wrapper).
    container_runtime: str = "pyxis"
    # Any other submitit executor parameter, passed as is (submitit rejects unknown ones).
    submitit: Dict[str, Any] = field(default_factory=dict)
    # Seconds between two looks at Slurm's accounting while mltrain waits and a run's own reports cannot
    # tell how it is doing (a rank failed, a cancel); 5x that otherwise. The reports are read every 0.1 s.
    poll_s: float = 1.0
    # A cluster reached over ssh from this machine (issue 65): the destination as `ssh` takes it (`user@host` or a
    # Host of ~/.ssh/config, which gives the port, key, jump host and ControlMaster). null: this machine's own
    # Slurm (a login node). mltrain, the run and its driver go there (mltrain.backends.remote).
    login: Optional[str] = None
    # The cluster's Python (3.9 or newer) that mltrain runs with there, by name on its PATH or absolute.
    python: str = "python3"

    @classmethod
    def for_controller(cls, node: Any) -> None:
        """One CPU, no GPU, at most 2 GB: a controller step queued beside the runs it starts must not hold a
        GPU or a node they wait for (on a one-GPU cluster that would be a deadlock)."""
        node.gpus_per_node, node.gpus_per_task, node.gpu_bind, node.cpus_per_task = 0, None, None, 1
        if node.mem_gb is not None:  # never more than the compute asks for already
            node.mem_gb = min(float(node.mem_gb), CONTROLLER_MEM_GB)
        node.additional_parameters = {k: v for k, v in node.additional_parameters.items()
                                      if k.replace("-", "_") not in NOT_FOR_CONTROLLERS}


#: What a controller step's Slurm job does not ask for (the runs it drives ask for them).
NOT_FOR_CONTROLLERS = ("gres", "gpus", "gpus_per_node", "gpus_per_task", "gpus_per_socket", "cpus_per_gpu",
                       "mem_per_gpu", "gpu_bind", "mem", "mem_per_cpu", "exclusive")
#: A controller's memory: mltrain's sweep driver with Optuna stays well under it.
CONTROLLER_MEM_GB = 2.0
