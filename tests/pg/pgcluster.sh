#!/bin/sh
# A throw-away PostgreSQL 15 cluster on loopback for the multi-node tests and bench:
# one primary and two synchronous standbys (synchronous_standby_names = 'ANY 1 (s1,s2)').
#
#   pgcluster.sh available                    exit 0 when the PostgreSQL binaries are here
#   pgcluster.sh start OWNER_PID P0 P1 P2     prints the cluster directory; the cluster stops
#                                             by itself when OWNER_PID dies (watchdog)
#   pgcluster.sh stop DIR                     stops every node, removes DIR
#   pgcluster.sh node DIR NAME stop|start|kill|promote   NAME = p, s1, s2 (kill = -m immediate)
#   pgcluster.sh follow DIR NAME PORT         repoint standby NAME at the primary on PORT
#
# initdb refuses to run as root: as root, the nodes run as the unprivileged user lcxpg
# (created when missing). Everything listens on 127.0.0.1 only, no Unix sockets.
set -eu
PGBIN=${LCX_PGBIN:-/usr/lib/postgresql/15/bin}
PGUSER_OS=lcxpg

as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u "$PGUSER_OS" -- "$@"; else "$@"; fi
}

ctl() {   # ctl DIR NAME ARGS...
    d=$1; n=$2; shift 2
    as_pg "$PGBIN/pg_ctl" -D "$d/$n" -l "$d/$n.log" -w -t 60 "$@" >/dev/null
}

stop_all() {
    d=$1
    [ -d "$d" ] || return 0
    for n in s1 s2 p; do
        [ -f "$d/$n/postmaster.pid" ] && as_pg "$PGBIN/pg_ctl" -D "$d/$n" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    done
    rm -rf "$d"
}

case "${1:-}" in
available)
    [ -x "$PGBIN/initdb" ] && [ -x "$PGBIN/pg_ctl" ] && [ -x "$PGBIN/pg_basebackup" ] && [ -x "$PGBIN/postgres" ]
    ;;
start)
    owner=$2; p0=$3; p1=$4; p2=$5
    if [ "$(id -u)" = 0 ] && ! id "$PGUSER_OS" >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin "$PGUSER_OS" 2>/dev/null || id "$PGUSER_OS" >/dev/null
    fi
    d=$(mktemp -d /tmp/lcxpg.XXXXXX)
    chmod 755 "$d"
    [ "$(id -u)" = 0 ] && chown "$PGUSER_OS" "$d"
    trap 'stop_all "$d"' EXIT INT TERM
    # watchdog from the start: the cluster never outlives its owner (a test killed even
    # by SIGKILL, or this script killed half-way, still cleans up)
    setsid sh -c "while kill -0 $owner 2>/dev/null && [ -d '$d' ]; do sleep 0.5; done; '$0' stop '$d'" \
        </dev/null >/dev/null 2>&1 &
    as_pg "$PGBIN/initdb" -D "$d/p" -U lcx --auth=trust --no-sync -E UTF8 --locale=C >"$d/initdb.log" 2>&1
    cat >>"$d/p/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $p0
unix_socket_directories = ''
max_connections = 60
shared_buffers = 32MB
wal_level = replica
max_wal_senders = 10
wal_keep_size = 128MB
hot_standby = on
synchronous_commit = on
synchronous_standby_names = 'ANY 1 (s1,s2)'
fsync = on
log_min_messages = warning
CONF
    ctl "$d" p start
    for s in s1 s2; do
        if [ $s = s1 ]; then port=$p1; else port=$p2; fi
        as_pg "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$p0" -U lcx -D "$d/$s" -R -X stream >>"$d/initdb.log" 2>&1
        cat >>"$d/$s/postgresql.auto.conf" <<CONF
port = $port
cluster_name = '$s'
primary_conninfo = 'host=127.0.0.1 port=$p0 user=lcx application_name=$s'
CONF
        ctl "$d" $s start
    done
    # both standbys streaming before anyone writes
    i=0
    while :; do
        n=$(as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$p0" -U lcx -d postgres -Atc \
            "select count(*) from pg_stat_replication where state='streaming'" 2>/dev/null || echo 0)
        [ "$n" = 2 ] && break
        i=$((i + 1)); [ $i -lt 300 ] || { echo "standbys did not connect" >&2; exit 1; }
        sleep 0.1
    done
    trap - EXIT INT TERM
    echo "$d"
    ;;
stop)
    stop_all "$2"
    ;;
node)
    d=$2; n=$3
    case $4 in
    stop) ctl "$d" "$n" -m fast stop ;;
    kill) ctl "$d" "$n" -m immediate stop ;;
    start) ctl "$d" "$n" start ;;
    promote) ctl "$d" "$n" promote ;;
    *) echo "unknown node action $4" >&2; exit 2 ;;
    esac
    ;;
follow)
    d=$2; n=$3; port=$4
    echo "primary_conninfo = 'host=127.0.0.1 port=$port user=lcx application_name=$n'" >>"$d/$n/postgresql.auto.conf"
    ctl "$d" "$n" -m fast restart
    ;;
*)
    sed -n '2,14p' "$0" >&2
    exit 2
    ;;
esac
