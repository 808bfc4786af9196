#!/usr/bin/env bash
# A second Slurm cluster with TWO nodes on this one machine, so that node_count=2 runs for real.
#
#   bash scripts/slurm_two_nodes.sh start [STATE_DIR]   # needs root, iproute2, and the main test cluster's
#   bash scripts/slurm_two_nodes.sh stop  [STATE_DIR]   # munged + slurmdbd (scripts/slurm_cluster.sh start)
#   source STATE_DIR/env.sh
#
# Each node is a network namespace (mltn1, mltn2) joined to a bridge (mltbr0, 10.78.0.1/24) by a veth
# pair, with its own UTS name (n1, n2), address (10.78.0.2, 10.78.0.3) and slurmd. slurmctld listens on
# the bridge address; accounting goes to the main cluster's slurmdbd under another cluster name.
# These are the project's own test hosts: nothing outside this machine is addressed. SLURM2_TAG, SLURM2_NET,
# SLURM2_NODE_PREFIX, SLURM2_CLUSTER and SLURM2_PORT_BASE rename all of it for a second such cluster beside it.
set -euo pipefail
# shellcheck source=scripts/slurm_conf_common.sh
. "$(dirname "$0")/slurm_conf_common.sh"

CMD=${1:-start}
DIR=$(realpath -m "${2:-/tmp/mltrain-slurm2}")
MAIN=$(realpath -m "${MLTRAIN_SLURM_DIR:-/tmp/mltrain-slurm-test}")
PORT=${SLURM2_PORT_BASE:-6917}
DBD_PORT=${SLURM_PORT_BASE:-6817}; DBD_PORT=$((DBD_PORT + 2))
# Names and addresses, changeable so that a second such cluster can run beside the first (defaults: the above).
TAG=${SLURM2_TAG:-mlt}            # namespaces <tag>n1/2, bridge <tag>br0, veths <tag>v1/2
NET=${SLURM2_NET:-10.78.0}        # the bridge's /24
NODE=${SLURM2_NODE_PREFIX:-n}     # node (and host) names <prefix>1, <prefix>2
CLUSTER=${SLURM2_CLUSTER:-mltrain2}
MARK="mltrain-two-nodes${SLURM2_TAG:+-$SLURM2_TAG}"
BR=${TAG}br0
log() { echo "[slurm_two_nodes] $*"; }
die() { echo "[slurm_two_nodes] error: $*" >&2; exit 1; }
alive() { local pid; [ -s "$1" ] || return 1; pid=$(cat "$1"); kill -0 "$pid" 2>/dev/null && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]; }

hosts_block() {
  sed -i "/# $MARK\$/d" /etc/hosts
  [ "${1:-}" = add ] && printf '%s.1 %sctl # %s\n%s.2 %s1 # %s\n%s.3 %s2 # %s\n' "$NET" "$TAG" "$MARK" "$NET" "$NODE" "$MARK" \
    "$NET" "$NODE" "$MARK" >> /etc/hosts
  return 0
}

stop() {
  export SLURM_CONF="$DIR/etc/slurm.conf"
  if alive "$DIR/run/slurmctld.pid" slurmctld; then scancel --cluster="$CLUSTER" -u root 2>/dev/null || true; fi
  for name in "slurmd-${NODE}1" "slurmd-${NODE}2" slurmctld; do
    pidfile="$DIR/run/$name.pid"
    if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      pid=$(cat "$pidfile"); kill -TERM "$pid"
      for _ in $(seq 100); do running "$pid" || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
  # Daemons of an earlier start whose pidfiles went with its folder: found by their network
  # namespace or the config they were started with.
  for i in 1 2; do ip netns pids "${TAG}n$i" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true; done
  stop_strays "$DIR" slurmctld slurmd slurmstepd slurmscriptd >/dev/null
  for i in 1 2; do ip netns del "${TAG}n$i" 2>/dev/null || true; ip link del "${TAG}v$i" 2>/dev/null || true; done
  ip link del "$BR" 2>/dev/null || true
  hosts_block remove
  log "stopped"
}

start() {
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
  [ -S "$MAIN/munge/munge.socket.2" ] || die "start the main test cluster first (scripts/slurm_cluster.sh start $MAIN)"
  stop >/dev/null 2>&1 || true
  # a port another process holds: one line now, not a node that never comes up (the slurmds listen in their own namespaces)
  local holder; holder=$(port_holder "$PORT")
  [ -z "$holder" ] || die "port $PORT (for slurmctld) is taken by $holder: stop it, or choose another (SLURM2_PORT_BASE)"
  install -d "$DIR"/{etc,state,log,run,tmp} "$DIR/spool/${NODE}1" "$DIR/spool/${NODE}2"
  ip link add "$BR" type bridge
  ip addr add "$NET.1/24" dev "$BR"
  ip link set "$BR" up
  for i in 1 2; do
    ip netns add "${TAG}n$i"
    ip link add "${TAG}v$i" type veth peer name eth0 netns "${TAG}n$i"
    ip link set "${TAG}v$i" master "$BR" up
    ip -n "${TAG}n$i" addr add "$NET.$((i + 1))/24" dev eth0
    ip -n "${TAG}n$i" link set eth0 up
    ip -n "${TAG}n$i" link set lo up
  done
  hosts_block add
  local sock="$MAIN/munge/munge.socket.2" mem gres
  # 4 GPUs per node declared to Slurm (stand-ins; slurm_conf_common.sh): both nodes name the same device files
  gres=$(slurm_gpus "$DIR" "${SLURM2_GPUS:-4}" "${NODE}[1-2]")
  mem=$(awk '/^MemTotal:/{print int($2/1024*0.3)}' /proc/meminfo)
  cat > "$DIR/etc/slurm.conf" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$(hostname -s)($NET.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
DefMemPerCPU=512
# Not pmix: both "nodes" share one filesystem, and PMIx's per-step scratch folders would collide.
MpiDefault=none
# A node whose slurmd stops answering is DOWN (and its jobs NODE_FAIL) after this, not Slurm's 300 s:
# the lost-node test (tests/test_faults_slurm.py) keeps to a minute.
SlurmdTimeout=${SLURM2_SLURMD_TIMEOUT:-10}
$(slurm_conf_common "$sock" "$DBD_PORT")
NodeName=${NODE}1 NodeAddr=$NET.2 CPUs=4 RealMemory=$mem $gres State=UNKNOWN
NodeName=${NODE}2 NodeAddr=$NET.3 CPUs=4 RealMemory=$mem $gres State=UNKNOWN
PartitionName=two Nodes=${NODE}1,${NODE}2 Default=YES MaxTime=INFINITE State=UP
EOF
  # slurmdbd lives beside the main cluster's config; this cluster registers under its own name
  cp "$MAIN/etc/slurmdbd.conf" "$DIR/etc/slurmdbd.conf"
  echo "export SLURM_CONF=$DIR/etc/slurm.conf" > "$DIR/env.sh"
  export SLURM_CONF="$DIR/etc/slurm.conf"
  sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
  slurmctld
  for _ in $(seq 120); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.25; done
  for i in 1 2; do
    # its own network and host name: ranks there resolve to their node's address, as on a real cluster.
    # nsenter, not `ip netns exec`: the latter remounts /sys, hiding the cgroup tree slurmd reads.
    nsenter --net="/run/netns/${TAG}n$i" unshare --uts sh -c "hostname $NODE$i; exec slurmd -N $NODE$i"
  done
  # how tests/slurm_support.py restarts a node's slurmd after killing it
  printf '%s1 %sn1\n%s2 %sn2\n' "$NODE" "$TAG" "$NODE" "$TAG" > "$DIR/etc/node_namespaces"
  for _ in $(seq 240); do
    [ "$(sinfo -h -o '%T' -p two 2>/dev/null | grep -cE '^(idle|mixed)')" -ge 1 ] && \
      [ "$(sinfo -h -N -o '%N %T' -p two | grep -cE 'idle|mixed')" = 2 ] && break
    sleep 0.25
  done
  timeout 60 srun -N 2 -n 2 -t 1 hostname | sort | tr '\n' ' ' | grep -q "${NODE}1 ${NODE}2" || die "a 2-node step did not run (logs: $DIR/log)"
  log "READY: nodes ${NODE}1 ($NET.2), ${NODE}2 ($NET.3); clients: source $DIR/env.sh"
}

case "$CMD" in
  start) start ;;
  stop) stop ;;
  *) die "usage: $0 start|stop [STATE_DIR]" ;;
esac
