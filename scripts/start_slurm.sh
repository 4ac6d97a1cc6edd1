#!/usr/bin/env bash
# A single-node Slurm on this machine (munge + slurmctld + slurmd, this host as the only node),
# for the real-submission test in tests/launchers. Debian or Ubuntu, as root; works without
# systemd (containers, CI). Idempotent: a second call only checks that Slurm answers.
#
#   scripts/start_slurm.sh          install if needed, configure, start, wait until the node is idle
#   scripts/start_slurm.sh --stop   stop the three daemons this script started
set -euo pipefail

SLURM_CONF=/etc/slurm/slurm.conf
PIDS=(/run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid)

say() { echo "start_slurm: $*"; }
die() { echo "start_slurm: error: $*" >&2; exit 1; }

if [[ "${1:-}" == "--stop" ]]; then
  for pidfile in "${PIDS[@]}"; do
    # only the pid each daemon recorded: never a kill by name
    [[ -s "$pidfile" ]] && kill "$(cat "$pidfile")" 2>/dev/null && say "stopped $(basename "$pidfile" .pid)"
  done
  exit 0
fi

[[ $(id -u) -eq 0 ]] || die "run as root (it installs packages and starts daemons)"

if command -v sinfo >/dev/null && scontrol ping 2>/dev/null | grep -q UP && sinfo -h -o %t | grep -qE '^(idle|mix|alloc)'; then
  say "Slurm is already up: $(sinfo -h -o '%P %D node(s) %t')"
  exit 0
fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  command -v apt-get >/dev/null || die "slurm-wlm is not installed and apt-get is missing; install slurm-wlm and munge by hand"
  say "installing slurm-wlm and munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

host=$(hostname -s)
getent hosts "$host" >/dev/null || die "this host's name $host does not resolve; add it to /etc/hosts"
cpus=$(nproc)
# leave a tenth of the memory to the system so slurmd does not mark the node as too small
memory_mb=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)

mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
# linuxproc process tracking and no task plugin: no cgroups and no systemd needed
cat >"$SLURM_CONF" <<EOF
# written by trainclock scripts/start_slurm.sh: one node, this host
ClusterName=trainclock
SlurmctldHost=$host
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=$host CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

# munge: a key (the package usually makes one) and its runtime folder, owned by its user
if [[ ! -s /etc/munge/munge.key ]]; then
  if command -v mungekey >/dev/null; then mungekey --create --force; else dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none; fi
fi
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge && chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! munge -n >/dev/null 2>&1; then
  runuser -u munge -- munged
fi

pgrep -F /run/slurmctld.pid >/dev/null 2>&1 || slurmctld
pgrep -F /run/slurmd.pid >/dev/null 2>&1 || slurmd

for _ in $(seq 60); do
  state=$(sinfo -h -o %t 2>/dev/null || true)
  case "$state" in
    idle*|mix*|alloc*) say "Slurm is up: $(sinfo -h -o '%P %D node(s) %c CPUs %t')"; exit 0 ;;
    down*|drain*) scontrol update nodename="$host" state=resume 2>/dev/null || true ;;
  esac
  sleep 1
done
die "the node did not become idle in 60 s; see /var/log/slurm/slurmctld.log and slurmd.log"
