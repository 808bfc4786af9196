#!/usr/bin/env bash
# A real single-node Slurm cluster for mltrain's tests and for trying mltrain on one machine.
#
#   bash scripts/slurm_cluster.sh start [STATE_DIR]   # install (Debian, root), configure, start, wait READY
#   bash scripts/slurm_cluster.sh stop  [STATE_DIR]   # cancel jobs, stop the daemons (also those whose folder is gone)
#   source STATE_DIR/env.sh                           # then: sinfo, sbatch, mltrain compute=slurm ...
#
# Daemons: munged -> mariadbd -> slurmdbd -> slurmctld -> slurmd, every file under STATE_DIR
# (default /tmp/mltrain-slurm). Accounting is on because submitit reads job states with sacct:
# without it a cancelled or killed job is never seen to end. Ports: SLURM_PORT_BASE (slurmctld; slurmd +1,
# slurmdbd +2; default 6817) and MARIADB_PORT (default 3306), so that a second cluster can run beside the first.
set -euo pipefail
# shellcheck source=scripts/slurm_conf_common.sh
. "$(dirname "$0")/slurm_conf_common.sh"

CMD=${1:-start}
DIR=$(realpath -m "${2:-${MLTRAIN_SLURM_DIR:-/tmp/mltrain-slurm}}")
CPUS=${SLURM_CPUS:-8}            # advertised CPUs; more than the real cores so 2-rank jobs and arrays fit
GPUS=${SLURM_GPUS:-4}            # GPUs declared to Slurm (stand-in devices: slurm_conf_common.sh says how)
PORT=${SLURM_PORT_BASE:-6817}    # slurmctld, slurmd = +1, slurmdbd = +2
DB_PORT=${MARIADB_PORT:-3306}
HOST=$(hostname -s)
log() { echo "[slurm_cluster] $*"; }
die() { echo "[slurm_cluster] error: $*" >&2; exit 1; }

alive() {  # alive PIDFILE NAME
  local pid; [ -s "$1" ] || return 1; pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]
}
wait_for() {  # wait_for SECONDS WHAT CMD...
  local limit=$1 what=$2 i; shift 2
  for ((i = 0; i < limit * 4; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  die "$what not ready after ${limit}s (logs in $DIR/log)"
}

stop() {
  export SLURM_CONF="$DIR/etc/slurm.conf"
  if alive "$DIR/run/slurmctld.pid" slurmctld; then
    ids=$(squeue -h -o %A 2>/dev/null | tr '\n' ' ')
    if [ -n "${ids// /}" ]; then
      scancel $ids 2>/dev/null || true
      for _ in $(seq 40); do [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.25; done
    fi
  fi
  for pair in slurmd:slurmd slurmctld:slurmctld slurmdbd:slurmdbd mariadbd:mariadbd munged:munged; do
    local name=${pair%%:*} pidfile="$DIR/run/${pair%%:*}.pid"
    if alive "$pidfile" "$name"; then
      # until it has exited, not until it is reaped (kill -0): an init that reaps late cost ~2 s a daemon
      pid=$(cat "$pidfile"); kill -TERM "$pid"
      for _ in $(seq 200); do running "$pid" || break; sleep 0.1; done
      running "$pid" && { kill -KILL "$pid"; for _ in $(seq 50); do running "$pid" || break; sleep 0.1; done; }
      log "stopped $name"
    fi
    rm -f "$pidfile"
  done
  # Daemons of an earlier start whose pidfiles went with its folder (test.sh starts afresh): found by the
  # folder they were started with; jobs' slurmstepd and slurmctld's slurmscriptd with them.
  local n; n=$(stop_strays "$DIR" slurmctld slurmd slurmdbd mariadbd munged slurmstepd slurmscriptd)
  [ "$n" = 0 ] || log "stopped $n daemons whose pidfiles were gone"
}

# A port that another process holds fails the start here in one line, before any daemon starts, instead of
# as a wait for READY that times out. This cluster's own running daemons keep theirs (start is idempotent).
check_ports() {
  local spec port name holder
  for spec in "$DB_PORT:mariadbd" "$PORT:slurmctld" "$((PORT + 1)):slurmd" "$((PORT + 2)):slurmdbd"; do
    port=${spec%%:*} name=${spec#*:}
    alive "$DIR/run/$name.pid" "$name" && continue
    holder=$(port_holder "$port")
    [ -z "$holder" ] || die "port $port (for $name) is taken by $holder: stop it, or choose other ports (SLURM_PORT_BASE, MARIADB_PORT)"
  done
  return 0
}

install_packages() {
  # iproute2: ss, which names the process holding a port (check_ports).
  # libpmix-dev: Slurm's mpi/pmix plugin opens the unversioned libpmix.so, which only the -dev package ships;
  # without it (a machine with no Open MPI development files) every srun fails "can not load PMIx library"
  local pkgs=(slurm-wlm munge libpmix2 libpmix-dev slurmdbd mariadb-server-core mariadb-client-core iproute2) missing=()
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "missing Debian packages (${missing[*]}) and not root to install them"
  log "installing ${missing[*]}"
  # keep the packages' own init scripts from starting daemons of their own
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${missing[@]}" > "$DIR/log/apt.log" 2>&1 \
    || { apt-get update -q > /dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >> "$DIR/log/apt.log" 2>&1; } \
    || { rm -f /usr/sbin/policy-rc.d; die "apt-get install failed (see $DIR/log/apt.log)"; }
  rm -f /usr/sbin/policy-rc.d
}

write_configs() {
  local mem; mem=$(awk '/^MemTotal:/{print int($2/1024*0.8)}' /proc/meminfo)
  local sock="$DIR/munge/munge.socket.2" gres
  gres=$(slurm_gpus "$DIR" "$GPUS" "$HOST")
  cat > "$DIR/etc/slurm.conf.new" <<EOF
ClusterName=mltrain
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
DefMemPerCPU=1024
# Debian's Open MPI speaks PMIx only
MpiDefault=pmix
$(slurm_conf_common "$sock" $((PORT + 2)))
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$mem $gres State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  mv -f "$DIR/etc/slurm.conf.new" "$DIR/etc/slurm.conf"
  echo "PMIxCliTmpDirBase=$DIR/tmp" > "$DIR/etc/mpi.conf"
  cat > "$DIR/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$sock
DbdHost=$HOST
DbdAddr=127.0.0.1
DbdPort=$((PORT + 2))
SlurmUser=root
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=root
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$DIR/etc/slurmdbd.conf"
  echo "export SLURM_CONF=$DIR/etc/slurm.conf" > "$DIR/env.sh"
}

start() {
  local t0; t0=$(date +%s.%N)
  install -d -m 0755 "$DIR" "$DIR"/{etc,state,spool,log,run,munge,tmp}
  install_packages
  getent hosts "$HOST" >/dev/null || die "hostname '$HOST' does not resolve (add '127.0.0.1 $HOST' to /etc/hosts)"
  check_ports
  [ -s "$DIR/munge/munge.key" ] || mungekey --create --keyfile "$DIR/munge/munge.key"
  chmod 600 "$DIR/munge/munge.key"
  write_configs
  export SLURM_CONF="$DIR/etc/slurm.conf"
  local sock="$DIR/munge/munge.socket.2"
  alive "$DIR/run/munged.pid" munged || munged --socket="$sock" --key-file="$DIR/munge/munge.key" \
    --log-file="$DIR/log/munged.log" --pid-file="$DIR/run/munged.pid" --seed-file="$DIR/munge/munged.seed"
  wait_for 20 munged bash -c "munge -n -S '$sock' | unmunge -S '$sock'"
  if ! alive "$DIR/run/mariadbd.pid" mariadbd; then
    [ -d "$DIR/mysql/mysql" ] || mariadb-install-db --no-defaults --datadir="$DIR/mysql" --user=root \
      --auth-root-authentication-method=normal --skip-test-db > "$DIR/log/mariadb-install.log" 2>&1
    setsid mariadbd --no-defaults --datadir="$DIR/mysql" --socket="$DIR/run/mysqld.sock" \
      --pid-file="$DIR/run/mariadbd.pid" --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
      --user=root --log-error="$DIR/log/mariadb.err" --innodb-buffer-pool-size=64M </dev/null >/dev/null 2>&1 &
  fi
  wait_for 60 mariadbd mariadb --no-defaults -h 127.0.0.1 -P "$DB_PORT" -u root -e 'select 1'
  # slurmdbd reads slurmdbd.conf from the folder of $SLURM_CONF
  alive "$DIR/run/slurmdbd.pid" slurmdbd || slurmdbd
  wait_for 60 slurmdbd sacctmgr -n list cluster
  alive "$DIR/run/slurmctld.pid" slurmctld || slurmctld
  wait_for 60 slurmctld bash -c "scontrol ping | grep -q UP"
  alive "$DIR/run/slurmd.pid" slurmd || slurmd
  wait_for 60 "node $HOST" bash -c "sinfo -h -n '$HOST' -o %T | grep -qE '^(idle|mixed|allocated|completing)'"
  wait_for 60 "a test job step" timeout 30 srun -n 1 -t 1 true
  log "READY in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')s: node $HOST, $CPUS CPUs, $GPUS GPUs; clients: source $DIR/env.sh"
}

case "$CMD" in
  start) start ;;
  stop) stop ;;
  *) die "usage: $0 start|stop [STATE_DIR]" ;;
esac
