#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for tests/infra/test_slurm.py (and by hand):
#
#   tests/infra/slurm_cluster.sh install   apt-get install slurm-wlm munge (root; Debian/Ubuntu)
#   tests/infra/slurm_cluster.sh start     munged (as user munge), slurmctld and slurmd (as root); prints
#                                          `export SLURM_CONF=...` for the clients (sbatch, squeue, scancel)
#   tests/infra/slurm_cluster.sh stop      stops the daemons this script started (by their pid files)
#
# State lives in $HOT_SLURM_DIR (default /tmp/hot-slurm). The cluster is cgroup-free (proctrack/linuxproc,
# task/none), has no accounting database (the Snakemake plugin is run with --slurm-status-command squeue), and one
# node with the machine's real CPUs and memory plus one *fake* GPU (GresTypes=gpu, gres.conf File=/dev/null) so that jobs of rules declaring `gpu=1` are scheduled (`--gpus=1`) and run on the CPU, where the
# workflow records "not measured: no GPU" for them.
set -euo pipefail
DIR=${HOT_SLURM_DIR:-/tmp/hot-slurm}
CONF=$DIR/etc/slurm.conf

need_root() { [ "$(id -u)" = 0 ] || { echo "slurm_cluster.sh: $1 needs root" >&2; exit 3; }; }

do_install() {
  need_root install
  command -v apt-get >/dev/null || { echo "slurm_cluster.sh: no apt-get" >&2; exit 3; }
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
  fi
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return 0; fi   # already running
  if [ ! -s /etc/munge/munge.key ]; then
    if command -v mungekey >/dev/null; then mungekey --create --force >/dev/null 2>&1 || true; fi
    [ -s /etc/munge/munge.key ] || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  runuser -u munge -- /usr/sbin/munged --force
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "slurm_cluster.sh: munged did not come up" >&2; exit 4
}

write_conf() {
  local host cpus mem
  host=$(hostname -s)
  cpus=$(nproc --all)
  mem=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)
  mkdir -p "$DIR/etc" "$DIR/state" "$DIR/spool" "$DIR/log"
  cat > "$CONF" <<EOF
# Written by tests/infra/slurm_cluster.sh: a single-node test cluster (no cgroups, no accounting).
ClusterName=hot-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldPort=${HOT_SLURMCTLD_PORT:-6817}
SlurmdPort=${HOT_SLURMD_PORT:-6818}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
ReturnToService=2
MinJobAge=600
SlurmdTimeout=60
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:1 State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  cat > "$DIR/etc/gres.conf" <<EOF
# One fake GPU (/dev/null as its device file): lets --gpus=1 jobs schedule on a GPU-less test machine.
AutoDetect=off
NodeName=$host Name=gpu File=/dev/null Count=1
EOF
  echo "$CONF"
}

start() {
  need_root start
  command -v slurmctld >/dev/null || { echo "slurm_cluster.sh: slurm-wlm is not installed (run: $0 install)" >&2; exit 3; }
  start_munge
  write_conf >/dev/null
  export SLURM_CONF=$CONF
  stop_daemons quiet
  # Jobs' nested `srun` (the Snakemake jobstep plugin) drops every SLURM_* variable, SLURM_CONF included, so the
  # clients inside jobs read the default path: link it to this cluster's files unless a real config is there.
  mkdir -p /etc/slurm
  for f in slurm.conf gres.conf; do
    if [ ! -e "/etc/slurm/$f" ] || [ -L "/etc/slurm/$f" ]; then ln -sfn "$DIR/etc/$f" "/etc/slurm/$f"
    else echo "slurm_cluster.sh: /etc/slurm/$f exists and is not ours; jobs' srun will read it" >&2; fi
  done
  rm -rf "$DIR/state" "$DIR/spool" && mkdir -p "$DIR/state" "$DIR/spool"
  slurmctld -f "$CONF" -c
  slurmd -f "$CONF" -c
  local host state
  host=$(hostname -s)
  for _ in $(seq 150); do
    state=$(sinfo -h -n "$host" -o %T 2>/dev/null || true)
    case "$state" in idle*|mix*|alloc*) echo "export SLURM_CONF=$CONF"; return 0 ;; esac
    sleep 0.2
  done
  echo "slurm_cluster.sh: node never became idle (state '${state:-none}'); logs in $DIR/log" >&2
  tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
  exit 4
}

stop_daemons() {
  local pidfile pid
  for pidfile in "$DIR/slurmd.pid" "$DIR/slurmctld.pid"; do
    [ -s "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$pidfile"
  done
  for f in slurm.conf gres.conf; do
    if [ "$(readlink "/etc/slurm/$f" 2>/dev/null)" = "$DIR/etc/$f" ]; then rm -f "/etc/slurm/$f"; fi
  done
  [ "${1:-}" = quiet ] || echo "stopped slurmd and slurmctld ($DIR)"
}

case "${1:-}" in
  install) do_install ;;
  start) start ;;
  stop) stop_daemons ;;
  conf) write_conf ;;
  *) echo "usage: $0 {install|start|stop|conf}" >&2; exit 2 ;;
esac
