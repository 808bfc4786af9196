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

# stop_strays DIR NAME...: kills the daemons named NAME (their /proc/PID/comm) that a start in DIR left running,
# and waits until they are gone, so that their ports are free when a stop returns. A daemon is DIR's when its
# SLURM_CONF is DIR's or an argument of its command line is a path in DIR (munged, mariadbd): nobody else's is
# touched. This is how a stop finds the daemons whose pidfiles went with their folder. By /proc, not one
# `pgrep -x 'a|b|...'`: a pattern over 15 characters matches nothing in a pgrep that enforces the kernel's name
# length (uutils'; procps' only warns so when nothing matched). Issue 67: the stop killed them without waiting,
# and returned while their ports were still held.
stop_strays() {
  local dir=$1 f pid name pids=() i; shift
  for f in /proc/[0-9]*/comm; do
    { read -r name < "$f"; } 2>/dev/null || continue
    case " $* " in *" $name "*) ;; *) continue ;; esac
    pid=${f#/proc/}; pid=${pid%/comm}
    if { tr '\0' '\n' < "/proc/$pid/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$dir/etc/slurm.conf" \
       || { tr '\0' '\n' < "/proc/$pid/cmdline"; } 2>/dev/null | D="$dir/" awk \
         '{ i = index($0, ENVIRON["D"]) } i == 1 || (i > 1 && substr($0, i - 1, 1) == "=") { found = 1 } END { exit !found }'; then
      kill -KILL "$pid" 2>/dev/null && pids+=("$pid")
    fi
  done
  # until every thread has exited (a zombie's sockets are closed; a container's init may never reap it): a
  # killed daemon's first thread is a zombie while its others still hold its files, and its port
  for pid in "${pids[@]}"; do
    for ((i = 0; i < 100; i++)); do
      running "$pid" || break
      sleep 0.05
    done
  done
  echo "${#pids[@]}"
}

# running PID: whether a thread of PID has yet to exit
running() {
  local f state
  for f in /proc/"$1"/task/*/stat; do
    { read -r _ _ state _ < "$f"; } 2>/dev/null || continue
    case $state in Z | X) ;; *) return 0 ;; esac
  done
  return 1
}

# port_holder PORT: who listens on TCP PORT in this network namespace ("pid N (NAME)"; "a process ss cannot
# name" when not root), nothing when nobody does. A start asks before its daemons are started: a daemon
# that cannot bind its port would otherwise only be seen when its wait for READY times out.
port_holder() {
  local line; line=$(ss -Hltnp "sport = :$1" 2>/dev/null | head -n 1)
  [ -n "$line" ] || return 0
  if [[ $line =~ \(\(\"([^\"]*)\",pid=([0-9]+) ]]; then
    echo "pid ${BASH_REMATCH[2]} (${BASH_REMATCH[1]})"
  else
    echo "a process ss cannot name"
  fi
}
