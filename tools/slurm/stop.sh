#!/usr/bin/env bash
# Stop the single-node cluster of tools/slurm/start.sh: cancel its jobs, then stop slurmd,
# slurmctld, slurmdbd and MariaDB (if started) and munged, by the pid files in STATE_DIR (never by
# name), and remove STATE_DIR and the /run/slurm/conf link to it.
#   sudo tools/slurm/stop.sh [STATE_DIR]     # default /tmp/headloc-slurm
set -uo pipefail

STATE=${1:-/tmp/headloc-slurm}
[ -d "$STATE" ] || { echo "tools/slurm/stop.sh: no cluster in $STATE" >&2; exit 0; }
export SLURM_CONF="$STATE/slurm.conf"

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if alive "$STATE/slurmctld.pid"; then
    scancel --full --quiet --partition=cpu,gpu 2>/dev/null || true
    scancel --quiet --user=root 2>/dev/null || true
fi
for pidfile in "$STATE/slurmd.pid" "$STATE/slurmctld.pid" "$STATE/slurmdbd.pid" "$STATE/mysql.pid" \
    "$STATE/munge/munged.pid"; do
    if alive "$pidfile"; then
        pid=$(cat "$pidfile")
        kill -TERM "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    fi
done
[ "$(readlink /run/slurm/conf 2>/dev/null)" = "$STATE" ] && rm -f /run/slurm/conf
rm -rf "$STATE"
echo "Slurm in $STATE stopped" >&2
