#!/usr/bin/env bash
# A single-node Slurm on this (Debian) machine, to try `fruit run --cluster slurm` and the
# batch-script recipe of docs/cluster.md without a real cluster. Run as root:
#
#   scripts/start-slurm.sh         # install (once), configure, start; says what it did
#   scripts/start-slurm.sh stop    # stop the daemons this script started (their pid files)
#   scripts/start-slurm.sh status  # whether they run and what sinfo says
#
# Idempotent: what is already installed, configured or running is left as it is. The
# daemons talk over 127.0.0.1 only (SlurmctldHost and NodeAddr are the loopback address);
# the node is this machine, all its cores and memory, in the partition `debug`.
# Accounting and job completion logging are off; jobs run as the user who submits them.
set -euo pipefail

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
STATE=/var/spool/slurmctld
SPOOL=/var/spool/slurmd
RUN=/run/fruit-slurm # our pid files and daemon logs
HOST=$(hostname -s)
case "$(getent ahostsv4 "$HOST" | head -1)" in
127.*) ;;
*) echo "start-slurm: error: the host name $HOST does not resolve to a 127.x address (add '127.0.0.1 $HOST' to /etc/hosts), so the daemons could not keep to the loopback address" >&2; exit 1 ;;
esac

say() { echo "start-slurm: $*"; }
die() {
    echo "start-slurm: error: $*" >&2
    exit 1
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_one() { # name pidfile
    if alive "$2"; then
        kill -TERM "$(cat "$2")"
        for _ in $(seq 50); do alive "$2" || break; sleep 0.2; done
        if alive "$2"; then die "$1 (pid $(cat "$2")) did not stop within 10 s"; fi
        say "stopped $1"
    else
        say "$1 was not running"
    fi
    rm -f "$2"
}

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages and starts daemons)"

case "${1:-start}" in
stop)
    stop_one slurmd $RUN/slurmd.pid
    stop_one slurmctld $RUN/slurmctld.pid
    stop_one munged /run/munge/munged.pid
    exit 0
    ;;
status)
    for d in munged:/run/munge/munged.pid slurmctld:$RUN/slurmctld.pid slurmd:$RUN/slurmd.pid; do
        if alive "${d#*:}"; then say "${d%%:*} running (pid $(cat "${d#*:}"))"; else say "${d%%:*} not running"; fi
    done
    sinfo 2>/dev/null || true
    exit 0
    ;;
start) ;;
*) die "unknown argument '$1'; give start (default), stop or status" ;;
esac

# 1. packages
if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
    say "slurm-wlm and munge already installed"
else
    say "installing slurm-wlm and munge (apt-get)"
    # the package lists first: a fresh image has none, and old ones name removed versions
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null
fi

# 2. munge: a key (the package makes one), its run folder, the daemon as user munge
if [ ! -s /etc/munge/munge.key ]; then
    say "creating /etc/munge/munge.key"
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
fi
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if alive /run/munge/munged.pid; then
    say "munged already running (pid $(cat /run/munge/munged.pid))"
else
    runuser -u munge -- /usr/sbin/munged
    say "started munged as user munge (pid $(cat /run/munge/munged.pid))"
fi

# 3. slurm.conf: this machine as the only node, its cores and memory as slurmd -C sees them
mkdir -p $RUN $STATE $SPOOL /var/log/slurm
node=$(slurmd -C | head -1 | sed "s/^NodeName=[^ ]*/NodeName=$HOST NodeAddr=127.0.0.1/")
new=$(
    cat <<EOF
# written by fruit's scripts/start-slurm.sh: a single-node Slurm on the loopback address
ClusterName=fruit-local
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$RUN/slurmctld.log
SlurmdLogFile=$RUN/slurmd.log
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL
AuthType=auth/munge
# bind to the address this host name resolves to, not to every address (0.0.0.0)
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
PropagatePrioProcess=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
$node State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
)
if [ -f $CONF ] && [ "$(cat $CONF)" = "$new" ]; then
    say "$CONF unchanged"
else
    if [ -f $CONF ] && ! grep -q "start-slurm.sh" $CONF; then
        cp $CONF "$CONF.before-start-slurm"
        say "kept the previous $CONF as $CONF.before-start-slurm"
    fi
    if alive $RUN/slurmctld.pid || alive $RUN/slurmd.pid; then
        die "$CONF would change while Slurm runs; run '$0 stop' first"
    fi
    printf '%s\n' "$new" >$CONF
    say "wrote $CONF ($node)"
fi

# 4. the daemons, in the foreground mode (-D) but in the background of this shell
if alive $RUN/slurmctld.pid; then
    say "slurmctld already running (pid $(cat $RUN/slurmctld.pid))"
else
    nohup slurmctld -D -i >>$RUN/slurmctld.out 2>&1 &
    echo $! >$RUN/slurmctld.pid
    say "started slurmctld (pid $!, log $RUN/slurmctld.log)"
fi
if alive $RUN/slurmd.pid; then
    say "slurmd already running (pid $(cat $RUN/slurmd.pid))"
else
    nohup slurmd -D >>$RUN/slurmd.out 2>&1 &
    echo $! >$RUN/slurmd.pid
    say "started slurmd (pid $!, log $RUN/slurmd.log)"
fi

# 5. wait until the node is idle
for _ in $(seq 60); do
    state=$(sinfo -h -n "$HOST" -o %t 2>/dev/null || true)
    case "$state" in idle* | mix* | alloc*) break ;; esac
    sleep 0.5
done
case "$state" in
idle* | mix* | alloc*) say "ready: node $HOST is $state (sinfo)"; sinfo ;;
*) die "the node is not idle after 30 s (sinfo says '${state:-nothing}'); see $RUN/slurmctld.log and $RUN/slurmd.log" ;;
esac
