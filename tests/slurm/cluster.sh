#!/usr/bin/env bash
# A private single-node Slurm (munged + slurmctld + slurmd on localhost) for the tests: every file it uses lives
# in one temporary folder, every daemon it starts is stopped by pid. Source it, then `cluster_start DIR` and
# `cluster_stop DIR` (idempotent; call it from an EXIT trap so a failing test still tears everything down).
# Facts behind the configuration: /work/shared/slurm/README.md (Slurm 22.05 from Debian, no systemd, no cgroups).

# Prints why a Slurm cluster cannot be started here, or nothing when it can.
cluster_unavailable() {
  local b
  for b in munged mungekey slurmctld slurmd sbatch squeue scontrol sinfo srun; do
    command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || { echo "$b not installed (apt-get install slurm-wlm munge)"; return; }
  done
  [ "$(id -u)" -eq 0 ] || { echo "the test cluster runs its daemons as root; not root"; return; }
  command -v mknod >/dev/null 2>&1 || { echo "mknod not available"; return; }
}

# Stops the process whose pid is in file $1 (SIGTERM, then SIGKILL after ~10 s) and waits for it to go.
_cluster_stop_pidfile() {
  local f=$1 pid i
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
  kill -TERM "$pid" 2>/dev/null
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  rm -f "$f"
}

# True when nothing accepts connections on 127.0.0.1:$1.
_cluster_port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Prints the daemons' logs (the tail of each) for a start-up that failed.
_cluster_logs() {
  local f
  for f in "$1"/log/munged.log "$1"/log/slurmctld.log "$1"/log/slurmd.log; do
    [ -f "$f" ] || { echo "== $f: not written"; continue; }
    echo "== $f (last 25 lines)"; tail -n 25 "$f"
  done
}

# True when the daemon whose pid file is $1 wrote it and runs.
_cluster_running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
# True while that daemon runs, and while its pid file is not yet written (it is still starting).
_cluster_alive() { [ ! -s "$1" ] || _cluster_running "$1"; }

# One attempt: munged, slurmctld and slurmd with state under DIR, until the node is idle. Returns non-zero as soon
# as a daemon exits, or after $2 seconds of wall time (each sinfo is bounded too: with no controller listening
# it retries for ~9 s, so a count of sinfo calls is no time bound).
_cluster_start_once() {
  local dir=$1 bound=$2 host i ctld_port slurmd_port deadline
  host=$(hostname -s)
  mkdir -p "$dir"/{state,spool,fakegpu,log,tmp}
  # Ports below Linux's ephemeral range (32768-60999): a port picked there can be taken by an outgoing
  # connection between the check and slurmctld's bind.
  for i in $(seq 50); do
    ctld_port=${RAGTRAIN_SLURMCTLD_PORT:-$((20000 + (RANDOM % 6000) * 2))}
    slurmd_port=$((ctld_port + 1))
    _cluster_port_free "$ctld_port" && _cluster_port_free "$slurmd_port" && break
  done
  # munged of our own on a private socket with a throw-away key: no system daemon is touched or required.
  mungekey --create --keyfile="$dir/munge.key" --force 2>/dev/null || dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 2>/dev/null
  chmod 600 "$dir/munge.key"
  munged --force --socket="$dir/munge.socket" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
         --log-file="$dir/log/munged.log" --seed-file="$dir/munged.seed" || return 1
  for i in 0 1 2 3; do [ -e "$dir/fakegpu/nvidia$i" ] || mknod "$dir/fakegpu/nvidia$i" c 1 3; done
  cat > "$dir/slurm.conf" <<CONF
ClusterName=ragtrain-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
FirstJobId=$((1000 + RANDOM * 16))
TmpFS=$dir/tmp
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=pmix
ReturnToService=2
EnforcePartLimits=ALL
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
GresTypes=gpu
KillWait=10
MinJobAge=300
InactiveLimit=0
Waittime=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=8000 Gres=gpu:4 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE MaxNodes=1 State=UP OverSubscribe=NO
CONF
  # PMIx puts per-step folders under this base (by default /tmp, shared with every other cluster).
  echo "PMIxCliTmpDirBase=$dir/tmp" > "$dir/mpi.conf"
  cat > "$dir/gres.conf" <<CONF
AutoDetect=off
NodeName=$host Name=gpu File=$dir/fakegpu/nvidia[0-3]
CONF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -c -f "$SLURM_CONF" || return 1
  slurmd -f "$SLURM_CONF" || return 1
  deadline=$((SECONDS + bound))
  while [ "$SECONDS" -lt "$deadline" ]; do
    [ "$(timeout 3 sinfo -h -o %T 2>/dev/null)" = idle ] && return 0
    _cluster_alive "$dir/slurmctld.pid" || { echo "slurmctld exited during start-up" >&2; return 1; }
    _cluster_alive "$dir/slurmd.pid" || { echo "slurmd exited during start-up" >&2; return 1; }
    sleep 0.1
  done
  echo "slurm node not idle after $bound s; sinfo: $(timeout 10 sinfo -h -o '%T %E' 2>&1)" >&2
  return 1
}

# `cluster_start DIR [SECONDS]`: starts munged, slurmctld and slurmd with state under DIR; exports SLURM_CONF. Ports
# and job ids are drawn at random, so that two test runs on one machine (two build folders) do not meet. A start
# that fails (a daemon exits, or the node is not idle within SECONDS, 20 by default) prints the daemons' logs on
# stderr and is tried again from scratch on other ports, three times in all; then it returns non-zero.
cluster_start() {
  local dir=$1 bound=${2:-20} attempt
  for attempt in 1 2 3; do
    _cluster_start_once "$dir" "$bound" && return 0
    echo "slurm test cluster: start-up attempt $attempt of 3 failed; the daemons' logs:" >&2
    _cluster_logs "$dir" >&2
    cluster_stop "$dir"
    rm -rf "$dir"
  done
  return 1
}

# Cancels what is left, stops slurmd, slurmctld and munged (in reverse order of start-up).
cluster_stop() {
  local dir=$1
  # scancel only while slurmctld runs: with no controller to answer it would retry for ~9 s.
  [ -f "$dir/slurm.conf" ] && _cluster_running "$dir/slurmctld.pid" &&
    SLURM_CONF="$dir/slurm.conf" timeout 10 scancel --full --quiet --user="$(id -un)" 2>/dev/null
  _cluster_stop_pidfile "$dir/slurmd.pid"
  _cluster_stop_pidfile "$dir/slurmctld.pid"
  _cluster_stop_pidfile "$dir/munged.pid"
}
