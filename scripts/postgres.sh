#!/usr/bin/env bash
# A throwaway PostgreSQL server for `augur bench --protocol postgres-*` (docs/postgres.md).
#
#   scripts/postgres.sh start  [DIR] [PORT] [--unsafe-fast] [--install]
#   scripts/postgres.sh stop   [DIR]
#   scripts/postgres.sh status [DIR]
#
# DIR defaults to /tmp/augur-pg, PORT to 15432 (below Linux's ephemeral range, 32768-60999, so
# that no outgoing connection holds it; `start` checks that it is free first). `start` initialises a cluster in DIR if there is
# none (superuser `postgres`, trust authentication, loopback only), writes the benchmark settings
# to DIR/augur.conf, starts the server and prints its connection URL. Settings are rewritten at
# every start, so a restart picks up a new PORT or a dropped --unsafe-fast.
#
#   --unsafe-fast  fsync, synchronous_commit and full_page_writes off: a crash can lose or corrupt
#                  data. Off by default: with them on, every commit waits for its WAL flush, as
#                  augur's durable protocols wait for theirs, which is the honest comparison.
#   --install      if the PostgreSQL server binaries are missing, install them with apt-get
#                  (as root) instead of printing the command and failing.
#
# Environment: AUGUR_PG_SHARED_BUFFERS (default 1GB), AUGUR_PG_MAX_CONNECTIONS (default 300).
#
# PostgreSQL refuses to run as root: run as root, the server runs as the `postgres` user (created
# by Debian's package; an `augur-pg` system user is created if there is none), which must be able
# to reach DIR.
set -euo pipefail

usage() {
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

cmd=""
dir=""
port=""
unsafe_fast=0
install=0
for arg in "$@"; do
    case "$arg" in
        --unsafe-fast) unsafe_fast=1 ;;
        --install) install=1 ;;
        -h | --help) usage ;;
        -*) echo "postgres.sh: unknown option $arg" >&2; usage ;;
        *)
            if [[ -z "$cmd" ]]; then cmd="$arg"
            elif [[ -z "$dir" ]]; then dir="$arg"
            elif [[ -z "$port" ]]; then port="$arg"
            else echo "postgres.sh: unexpected argument $arg" >&2; usage
            fi
            ;;
    esac
done
[[ -n "$cmd" ]] || usage
dir="${dir:-/tmp/augur-pg}"
port="${port:-15432}"
[[ "$port" =~ ^[0-9]+$ ]] || { echo "postgres.sh: PORT must be a number, got '$port'" >&2; exit 2; }
shared_buffers="${AUGUR_PG_SHARED_BUFFERS:-1GB}"
max_connections="${AUGUR_PG_MAX_CONNECTIONS:-300}"
url="host=127.0.0.1 port=$port user=postgres dbname=postgres"

# The directory holding initdb and pg_ctl: on PATH, else Debian's newest versioned one.
find_bindir() {
    if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
        dirname "$(command -v pg_ctl)"
        return
    fi
    local d
    d="$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
    if [[ -x "$d/pg_ctl" && -x "$d/initdb" ]]; then
        echo "$d"
    fi
}

bindir="$(find_bindir)"
if [[ -z "$bindir" ]]; then
    if [[ "$install" == 1 && "$cmd" == start ]]; then
        if [[ "$(id -u)" != 0 ]]; then
            echo "postgres.sh: --install needs root (apt-get)" >&2
            exit 1
        fi
        apt-get update >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql >&2
        bindir="$(find_bindir)"
        [[ -n "$bindir" ]] || { echo "postgres.sh: installed, but no pg_ctl found" >&2; exit 1; }
    else
        echo "postgres.sh: PostgreSQL server binaries (pg_ctl, initdb) not found. Install them with" >&2
        echo "    apt-get update && apt-get install -y postgresql" >&2
        echo "or run: $0 start --install" >&2
        exit 1
    fi
fi

# Run a command as the user that owns the cluster.
run_user=""
if [[ "$(id -u)" == 0 ]]; then
    if id postgres >/dev/null 2>&1; then
        run_user=postgres
    else
        if ! id augur-pg >/dev/null 2>&1; then
            useradd --system --no-create-home --shell /usr/sbin/nologin augur-pg
        fi
        run_user=augur-pg
    fi
fi
as_owner() {
    if [[ -n "$run_user" ]]; then
        (cd / && runuser -u "$run_user" -- "$@")
    else
        (cd / && "$@")
    fi
}

# The URL of the server in DIR: the port it was last started with, else PORT.
server_url() {
    local p
    p="$(sed -n 's/^port = \([0-9]*\)$/\1/p' "$dir/augur.conf" 2>/dev/null || true)"
    echo "host=127.0.0.1 port=${p:-$port} user=postgres dbname=postgres"
}

running() {
    [[ -f "$dir/PG_VERSION" ]] && as_owner "$bindir/pg_ctl" -D "$dir" status >/dev/null 2>&1
}

write_settings() {
    local durability
    if [[ "$unsafe_fast" == 1 ]]; then
        durability="fsync = off
synchronous_commit = off
full_page_writes = off"
    else
        durability="fsync = on
synchronous_commit = on
full_page_writes = on"
    fi
    as_owner tee "$dir/augur.conf" >/dev/null <<EOF
# Written by scripts/postgres.sh at every start; edits are lost.
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = $max_connections
shared_buffers = '$shared_buffers'
# SERIALIZABLE keeps predicate locks per transaction; the default (64) makes wide read sets
# escalate to page and relation locks and abort more.
max_pred_locks_per_transaction = 256
# No checkpoint storms in the middle of a run.
max_wal_size = '8GB'
checkpoint_timeout = '30min'
# English server messages: augur-postgres tells the two kinds of 40001 apart by message.
lc_messages = 'C'
$durability
EOF
    if ! grep -q "^include_if_exists = 'augur.conf'" "$dir/postgresql.conf"; then
        echo "include_if_exists = 'augur.conf'" | as_owner tee -a "$dir/postgresql.conf" >/dev/null
    fi
}

case "$cmd" in
    start)
        if running; then
            echo "postgres.sh: already running in $dir (stop it to change settings)" >&2
            server_url
            exit 0
        fi
        # PostgreSQL's own message for a taken port blames another postmaster; say what it is.
        if ! python3 -c "import socket,sys; s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1])))" "$port" 2>/dev/null; then
            echo "postgres.sh: port $port on 127.0.0.1 is in use (a server, or a connection's local end); choose another: scripts/postgres.sh start $dir PORT" >&2
            exit 1
        fi
        if [[ ! -f "$dir/PG_VERSION" ]]; then
            mkdir -p "$dir"
            [[ -n "$run_user" ]] && chown "$run_user" "$dir"
            chmod 700 "$dir"
            as_owner "$bindir/initdb" -D "$dir" -U postgres --auth=trust --encoding=UTF8 \
                --locale=C >"$dir.initdb.log" 2>&1 || {
                cat "$dir.initdb.log" >&2
                exit 1
            }
            rm -f "$dir.initdb.log"
        fi
        write_settings
        if ! as_owner "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null; then
            echo "postgres.sh: the server did not start; tail of $dir/server.log:" >&2
            tail -n 20 "$dir/server.log" >&2 || true
            exit 1
        fi
        if [[ "$unsafe_fast" == 1 ]]; then
            echo "postgres.sh: started WITHOUT fsync (--unsafe-fast)" >&2
        fi
        echo "$url"
        ;;
    stop)
        if running; then
            as_owner "$bindir/pg_ctl" -D "$dir" -m fast -w stop >/dev/null
            echo "postgres.sh: stopped the server in $dir" >&2
        else
            echo "postgres.sh: no server running in $dir" >&2
        fi
        ;;
    status)
        if running; then
            echo "postgres.sh: running in $dir" >&2
            server_url
        else
            echo "postgres.sh: not running in $dir" >&2
            exit 3
        fi
        ;;
    *)
        echo "postgres.sh: unknown command '$cmd'" >&2
        usage
        ;;
esac
