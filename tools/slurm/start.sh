#!/usr/bin/env bash
# Stand up a single-node Slurm cluster on this machine: slurmctld + slurmd + munged, one node with
# a fake GPU (a gres backed by /dev/null), no accounting database. For tests/slurm and for trying
# profiles/slurm by hand; it needs root and a Debian-like system (apt-get).
#
#   sudo tools/slurm/start.sh [STATE_DIR]     # default /tmp/headloc-slurm; about 20 s (+ apt-get once)
#   export SLURM_CONF=STATE_DIR/slurm.conf    # what the script prints last: sbatch, squeue, sinfo
#   sudo tools/slurm/stop.sh [STATE_DIR]      # stops the daemons this script started
#
# Everything lives in STATE_DIR (config, spool, logs, pid files, the munge socket), and the daemons
# listen on their own ports, so an installed munged is left alone. One thing lies outside: the
# symlink /run/slurm/conf -> STATE_DIR, where Slurm's commands look for their configuration when
# SLURM_CONF is unset and /etc/slurm/slurm.conf does not exist (as in a "configless" cluster). The
# plugin's job step (snakemake-executor-plugin-slurm-jobstep 0.6.1) runs its srun without SLURM_CONF,
# so the jobs need it; a machine with an /etc/slurm/slurm.conf is already part of a cluster and is
# refused.
# Environment: HEADLOC_SLURM_CPUS (default 8) and HEADLOC_SLURM_MEM_MB (default 16000) size the
# node; the node's real CPUs and memory are not checked (SlurmdParameters=config_overrides).
# HEADLOC_SLURM_ACCOUNTING=1 adds an accounting database (slurmdbd + a MariaDB server of its own in
# STATE_DIR, both installed with apt-get when missing; about a minute more) with the account
# "headloc-test" for root, so that sacct, sacctmgr and sshare work as on most production clusters.
# Exit status: 0 when the node is idle, 2 when this machine cannot run Slurm (the reason on stderr).
set -euo pipefail

STATE=${1:-/tmp/headloc-slurm}
CPUS=${HEADLOC_SLURM_CPUS:-8}
MEM_MB=${HEADLOC_SLURM_MEM_MB:-16000}
CTLD_PORT=${HEADLOC_SLURM_CTLD_PORT:-16817}
SLURMD_PORT=${HEADLOC_SLURM_SLURMD_PORT:-16818}
DBD_PORT=${HEADLOC_SLURM_DBD_PORT:-16819}
DB_PORT=${HEADLOC_SLURM_DB_PORT:-16820}
ACCOUNTING=${HEADLOC_SLURM_ACCOUNTING:-0}

STARTED=0  # once daemons run, a failure stops them again
cannot() {
    echo "tools/slurm/start.sh: cannot start Slurm: $*" >&2
    [ "$STARTED" = 1 ] && "$(dirname "$0")/stop.sh" "$STATE" >/dev/null 2>&1
    exit 2
}

[ "$(id -u)" = 0 ] || cannot "needs root (it installs packages and runs slurmd), running as $(id -un)"

# ---- packages (Debian: slurm-wlm = slurmctld + slurmd + client tools; munge authenticates them)
commands=(slurmctld slurmd sbatch munged)
packages=(slurm-wlm munge)
if [ "$ACCOUNTING" = 1 ]; then
    commands+=(slurmdbd mariadbd mariadb-install-db)
    packages+=(slurmdbd mariadb-server)
fi
missing=$(for command in "${commands[@]}"; do command -v "$command" >/dev/null || echo "$command"; done)
if [ -n "$missing" ]; then
    command -v apt-get >/dev/null || cannot "$(echo $missing) not installed and there is no apt-get"
    export DEBIAN_FRONTEND=noninteractive
    echo "installing ${packages[*]} with apt-get" >&2
    if ! apt-get install -y -qq --no-install-recommends "${packages[@]}" >"${TMPDIR:-/tmp}/headloc-slurm-apt.log" 2>&1; then
        apt-get update -qq >>"${TMPDIR:-/tmp}/headloc-slurm-apt.log" 2>&1 || true
        apt-get install -y -qq --no-install-recommends "${packages[@]}" >>"${TMPDIR:-/tmp}/headloc-slurm-apt.log" 2>&1 \
            || cannot "apt-get install ${packages[*]} failed (log: ${TMPDIR:-/tmp}/headloc-slurm-apt.log)"
    fi
fi

[ -e /etc/slurm/slurm.conf ] && cannot "/etc/slurm/slurm.conf exists: this machine is part of a Slurm cluster already"
if [ -e /run/slurm/conf ] && [ "$(readlink /run/slurm/conf)" != "$STATE" ]; then
    cannot "/run/slurm/conf exists and is not ours (a configless Slurm node?)"
fi
if [ -e "$STATE/slurmctld.pid" ] && kill -0 "$(cat "$STATE/slurmctld.pid")" 2>/dev/null; then
    cannot "a cluster from this script is already running in $STATE (stop it: tools/slurm/stop.sh $STATE)"
fi
rm -rf "$STATE"
mkdir -p "$STATE"/{spool,state,munge}
chmod 755 "$STATE"
chmod 700 "$STATE/munge"
HOST=$(hostname -s)

# ---- munge: its own key and socket in STATE (an installed munged, if any, is left alone)
STARTED=1
dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1 count=1024 status=none
chmod 400 "$STATE/munge/munge.key"
munged --force --socket="$STATE/munge/munge.socket" --key-file="$STATE/munge/munge.key" \
    --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/munge/munged.log" \
    --seed-file="$STATE/munge/munged.seed" \
    || cannot "munged did not start (log: $STATE/munge/munged.log)"

# ---- accounting (optional): MariaDB on 127.0.0.1:$DB_PORT, slurmdbd on $DBD_PORT
if [ "$ACCOUNTING" = 1 ]; then
    mkdir -p "$STATE/mysql"
    mariadb-install-db --user=root --datadir="$STATE/mysql" --auth-root-authentication-method=socket \
        >"$STATE/mysql-install.log" 2>&1 || cannot "mariadb-install-db failed (log: $STATE/mysql-install.log)"
    mariadbd --user=root --datadir="$STATE/mysql" --socket="$STATE/mysql.sock" --port="$DB_PORT" \
        --bind-address=127.0.0.1 --pid-file="$STATE/mysql.pid" --log-error="$STATE/mysql.log" \
        --skip-log-bin --innodb-buffer-pool-size=64M </dev/null >/dev/null 2>&1 &
    for _ in $(seq 60); do [ -S "$STATE/mysql.sock" ] && break; sleep 0.5; done
    mariadb --socket="$STATE/mysql.sock" -e "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" \
        || cannot "MariaDB did not start (log: $STATE/mysql.log)"
    cat >"$STATE/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
CONF
    chmod 600 "$STATE/slurmdbd.conf"
    ACCOUNTING_CONF="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$STATE/munge/munge.socket"
else
    ACCOUNTING_CONF="# no accounting: sacct fails (\"Slurm accounting storage is disabled\"), squeue works
AccountingStorageType=accounting_storage/none"
fi

# ---- slurm.conf: the smallest configuration that schedules CPUs, memory and GPUs
cat >"$STATE/slurm.conf" <<CONF
# headloc's single-node test cluster (tools/slurm/start.sh); compare with yours: docs/slurm.md
ClusterName=headloc
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$STATE/munge/munge.socket
StateSaveLocation=$STATE/state
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
$ACCOUNTING_CONF
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
JobCompType=jobcomp/none
# finished jobs stay visible to squeue/scontrol for 5 minutes
MinJobAge=300
KillWait=5
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$HOST MaxTime=INFINITE State=UP
CONF
cat >"$STATE/gres.conf" <<CONF
AutoDetect=off
NodeName=$HOST Name=gpu Count=1 File=/dev/null
CONF

export SLURM_CONF="$STATE/slurm.conf"
mkdir -p /run/slurm
ln -sfn "$STATE" /run/slurm/conf
if [ "$ACCOUNTING" = 1 ]; then
    slurmdbd || cannot "slurmdbd did not start (log: $STATE/slurmdbd.log)"
    for _ in $(seq 60); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.5; done
    { sacctmgr -i add cluster headloc && sacctmgr -i add account headloc-test \
        && sacctmgr -i add user root account=headloc-test; } >"$STATE/sacctmgr.log" 2>&1 \
        || cannot "sacctmgr could not add the cluster, account and user (log: $STATE/sacctmgr.log)"
fi
slurmctld -f "$SLURM_CONF" || cannot "slurmctld did not start (log: $STATE/slurmctld.log)"
slurmd -f "$SLURM_CONF" || cannot "slurmd did not start (log: $STATE/slurmd.log)"

# ---- wait for the node to be schedulable
for _ in $(seq 60); do
    state=$(sinfo -h -N -n "$HOST" -o %T 2>/dev/null | head -1 || true)
    if [ "$state" = idle ]; then
        echo "Slurm is up: node $HOST idle ($CPUS CPUs, $MEM_MB MB, 1 fake GPU), partitions cpu (default) and gpu," \
            "$([ "$ACCOUNTING" = 1 ] && echo "accounting: account headloc-test" || echo "no accounting")" >&2
        echo "export SLURM_CONF=$SLURM_CONF"
        exit 0
    fi
    sleep 1
done
echo "node state after 60 s: '${state:-none}'; last lines of the logs:" >&2
tail -5 "$STATE/slurmctld.log" "$STATE/slurmd.log" >&2 || true
cannot "the node did not become idle within 60 s"
