#!/usr/bin/env bash
# A "remote" Slurm login for mltrain's tests of remote clusters (issue 65): sshd on a loopback port, in front of
# the test Slurm clusters, logged into as another local user that cannot read the submitting side's folders.
#
#   bash scripts/remote_ssh.sh start [STATE_DIR]   # install openssh-server (Debian, root), the user, keys, sshd
#   bash scripts/remote_ssh.sh stop  [STATE_DIR]
#   bash scripts/remote_ssh.sh pause|resume [STATE_DIR]  # every connection dropped, sshd gone; then back
#   source STATE_DIR/env.sh                        # MLTRAIN_SSH_CONFIG: the ssh config mltrain passes to ssh -F
#
# The user (REMOTE_USER, default mltrain-remote) has a home of its own, mode 700, and the test cluster's
# SLURM_CONF and a PATH whose first python3 is REMOTE_PYTHON's (default: the system's /usr/bin/python3, as a
# cluster's admin-installed Python) in ~/.ssh/environment, as a login node's profile gives them. Neither mltrain nor
# its requirements are installed for it: a submission sends mltrain and makes a venv of its requirements there.
#
# STATE_DIR/ssh_config names the hosts: `mltrain-remote` (trusted host key, ControlMaster), `mltrain-remote-2nodes`
# (the same login, its SLURM_CONF the two-node test cluster's), and for the tests of what must fail in one line,
# `mltrain-remote-readonly` (its MLTRAIN_HOME a folder it cannot write), `mltrain-remote-untrusted` (its host key
# unknown) and `mltrain-remote-nokey` (a key the server refuses). Needs no network: everything is on 127.0.0.1.
set -euo pipefail

CMD=${1:-start}
DIR=$(realpath -m "${2:-/tmp/mltrain-remote-ssh}")
PORT=${REMOTE_SSH_PORT:-2222}
USER_NAME=${REMOTE_USER:-mltrain-remote}
PY=${REMOTE_PYTHON:-/usr/bin/python3}
log() { echo "[remote_ssh] $*"; }
die() { echo "[remote_ssh] error: $*" >&2; exit 1; }

stop() {
  if [ -s "$DIR/sshd.pid" ] && kill -0 "$(cat "$DIR/sshd.pid")" 2>/dev/null; then
    kill "$(cat "$DIR/sshd.pid")" 2>/dev/null || true
  fi
  # a ControlMaster left by the tests
  for sock in "$DIR"/cm-*; do [ -S "$sock" ] && ssh -F "$DIR/ssh_config" -O exit -S "$sock" x >/dev/null 2>&1 || true; done
  pkill -u "$USER_NAME" >/dev/null 2>&1 || true
  log "stopped"
}

# pause | resume: the connection lost and back (the tests' fault), the account and its runs untouched
if [ "$CMD" = pause ]; then
  [ -s "$DIR/sshd.pid" ] && kill "$(cat "$DIR/sshd.pid")" 2>/dev/null || true
  pkill -f "sshd: $USER_NAME" > /dev/null 2>&1 || true   # every connection, a ControlMaster's too
  for sock in "$DIR"/cm-*; do [ -e "$sock" ] && rm -f "$sock"; done
  log "paused: no connection to $USER_NAME until resume"; exit 0
fi
if [ "$CMD" = resume ]; then
  /usr/sbin/sshd -f "$DIR/sshd_config" -E "$DIR/sshd.log"
  log "resumed"; exit 0
fi
if [ "$CMD" = stop ]; then stop; exit 0; fi
[ "$CMD" = start ] || die "usage: $0 start|stop [STATE_DIR]"
[ "$(id -u)" = 0 ] || die "must run as root (it adds a user and starts sshd)"

missing=()
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
# the cluster's Python makes mltrain's venv there (python3 -m venv needs Debian's python3-venv)
[ "$PY" != /usr/bin/python3 ] || /usr/bin/python3 -m ensurepip --version > /dev/null 2>&1 || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${missing[@]}" > /tmp/mltrain-apt-ssh.log 2>&1 \
    || { apt-get update -q > /dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >> /tmp/mltrain-apt-ssh.log 2>&1; } \
    || die "apt-get install ${missing[*]} failed (see /tmp/mltrain-apt-ssh.log)"
fi
stop > /dev/null 2>&1 || true
mkdir -p "$DIR" /run/sshd
chmod 755 "$DIR"

# The "remote" user: its own home, unreadable by others, and nothing of the submitting side readable to it.
id "$USER_NAME" > /dev/null 2>&1 || useradd --create-home --shell /bin/bash "$USER_NAME"
usermod -p '*' "$USER_NAME"  # no password, but not locked: sshd without PAM refuses a locked account's keys
HOME_R=$(getent passwd "$USER_NAME" | cut -d: -f6)
chmod 700 "$HOME_R"
rm -rf "$HOME_R/.mltrain" "$HOME_R/.cache/mltrain"  # a fresh cluster account each start

# Keys: the server's host key, the tests' client key, and one the server does not accept.
[ -f "$DIR/host_key" ] || ssh-keygen -q -t ed25519 -N "" -f "$DIR/host_key" -C mltrain-remote-host
[ -f "$DIR/id_ed25519" ] || ssh-keygen -q -t ed25519 -N "" -f "$DIR/id_ed25519" -C mltrain-tests
[ -f "$DIR/other_key" ] || ssh-keygen -q -t ed25519 -N "" -f "$DIR/other_key" -C not-authorized
install -d -m 700 -o "$USER_NAME" -g "$USER_NAME" "$HOME_R/.ssh"
install -m 600 -o "$USER_NAME" -g "$USER_NAME" "$DIR/id_ed25519.pub" "$HOME_R/.ssh/authorized_keys"
SLURM_CONF_R=${REMOTE_SLURM_CONF:-${SLURM_CONF:-/tmp/mltrain-slurm-test/etc/slurm.conf}}
# SLURM_CONF comes with each login (ssh_config's SetEnv below: one login per test cluster); a login node sets its own
echo "PATH=$(dirname "$PY"):/usr/local/bin:/usr/bin:/bin" > "$HOME_R/.ssh/environment"
chown "$USER_NAME:$USER_NAME" "$HOME_R/.ssh/environment"
chmod 600 "$HOME_R/.ssh/environment"
# Slurm's accounting knows the user (a cluster that enforces associations would refuse it otherwise).
if command -v sacctmgr > /dev/null && SLURM_CONF=$SLURM_CONF_R sacctmgr -n list cluster > /dev/null 2>&1; then
  SLURM_CONF=$SLURM_CONF_R sacctmgr -i add user "$USER_NAME" account=root > /dev/null 2>&1 || true
fi

cat > "$DIR/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $PORT
HostKey $DIR/host_key
PidFile $DIR/sshd.pid
AllowUsers $USER_NAME
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin no
PermitUserEnvironment yes
AcceptEnv MLTRAIN_HOME SLURM_CONF
UsePAM no
MaxStartups 100:30:200
MaxSessions 100
Subsystem sftp internal-sftp
EOF
/usr/sbin/sshd -t -f "$DIR/sshd_config" || die "sshd refuses its config ($DIR/sshd_config)"
/usr/sbin/sshd -f "$DIR/sshd_config" -E "$DIR/sshd.log"

echo "[127.0.0.1]:$PORT $(cut -d' ' -f1,2 "$DIR/host_key.pub")" > "$DIR/known_hosts"
: > "$DIR/known_hosts_empty"
SLURM2_CONF_R=${REMOTE_SLURM2_CONF:-${MLTRAIN_SLURM2_CONF:-/tmp/mltrain-slurm2-test/etc/slurm.conf}}
cat > "$DIR/ssh_config" <<EOF
Host mltrain-remote mltrain-remote-2nodes mltrain-remote-readonly mltrain-remote-untrusted mltrain-remote-nokey
  HostName 127.0.0.1
  Port $PORT
  User $USER_NAME
  IdentitiesOnly yes
  StrictHostKeyChecking yes
  LogLevel ERROR
Host mltrain-remote mltrain-remote-2nodes mltrain-remote-readonly
  IdentityFile $DIR/id_ed25519
  UserKnownHostsFile $DIR/known_hosts
  ControlMaster auto
  ControlPath $DIR/cm-%n
  ControlPersist 120
Host mltrain-remote
  SetEnv SLURM_CONF=$SLURM_CONF_R
Host mltrain-remote-2nodes
  SetEnv SLURM_CONF=$SLURM2_CONF_R
Host mltrain-remote-readonly
  SetEnv SLURM_CONF=$SLURM_CONF_R MLTRAIN_HOME=/usr/share
Host mltrain-remote-untrusted
  IdentityFile $DIR/id_ed25519
  UserKnownHostsFile $DIR/known_hosts_empty
Host mltrain-remote-nokey
  IdentityFile $DIR/other_key
  UserKnownHostsFile $DIR/known_hosts
EOF
chmod 644 "$DIR/ssh_config"
echo "export MLTRAIN_SSH_CONFIG=$DIR/ssh_config" > "$DIR/env.sh"

for _ in $(seq 1 40); do
  ssh -F "$DIR/ssh_config" -o BatchMode=yes mltrain-remote true 2> /dev/null && break
  sleep 0.25
done
ssh -F "$DIR/ssh_config" -o BatchMode=yes mltrain-remote true || die "cannot log in as $USER_NAME (see $DIR/sshd.log)"
log "READY: ssh -F $DIR/ssh_config mltrain-remote (user $USER_NAME, port $PORT, python $(ssh -F "$DIR/ssh_config" mltrain-remote 'command -v python3'))"
