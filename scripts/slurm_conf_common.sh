# Sourced by slurm_cluster.sh and slurm_two_nodes.sh: the slurm.conf lines both test clusters share.
# slurm_conf_common MUNGE_SOCKET SLURMDBD_PORT
slurm_conf_common() {
  cat <<CONF
# GPUs are generic resources (slurm_gpus below declares each node's)
GresTypes=gpu
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job restarts after ~10 s instead of 120 s
AuthInfo=socket=$1,cred_expire=10
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=5
SwitchType=switch/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$2
AccountingStoragePass=$1
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/none
# impossible requests fail at once instead of pending forever
EnforcePartLimits=ALL
ReturnToService=2
SlurmdParameters=config_overrides
MailProg=/bin/true
MinJobAge=300
KillWait=5
InactiveLimit=0
Waittime=0
CONF
}

# slurm_gpus STATE_DIR COUNT NODES: GPUs declared to Slurm on machines without any, so that Slurm itself
# allocates them and sets each job's and task's CUDA_VISIBLE_DEVICES as on a real GPU cluster. The devices
# are stand-ins: character devices of the NVIDIA driver's major number (195) under STATE_DIR/dev, which
# nothing opens (TaskPlugin=task/none: no cgroup device constraint) and AutoDetect=off keeps Slurm from
# asking NVML about. Writes STATE_DIR/etc/gres.conf (slurmd reads it beside slurm.conf); prints the node
# line's Gres= field. COUNT=0 declares none. The daemons must be (re)started to take it: a reconfigure
# does not add a node's GRES.
slurm_gpus() {
  local dir=$1 count=$2 nodes=$3 i
  if [ "$count" -eq 0 ]; then : > "$dir/etc/gres.conf"; return 0; fi
  install -d "$dir/dev"
  for ((i = 0; i < count; i++)); do
    [ -c "$dir/dev/nvidia$i" ] || mknod "$dir/dev/nvidia$i" c 195 "$i" \
      || { echo "slurm_gpus: mknod $dir/dev/nvidia$i failed (needs root)" >&2; return 1; }
  done
  printf 'AutoDetect=off\nNodeName=%s Name=gpu File=%s/dev/nvidia[0-%d]\n' "$nodes" "$dir" $((count - 1)) > "$dir/etc/gres.conf"
  echo "Gres=gpu:$count"
}
