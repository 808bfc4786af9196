# Sourced by slurm_cluster.sh and slurm_two_nodes.sh: the slurm.conf lines both test clusters share.
# slurm_conf_common MUNGE_SOCKET SLURMDBD_PORT
slurm_conf_common() {
  cat <<CONF
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
