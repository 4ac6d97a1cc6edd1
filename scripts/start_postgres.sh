#!/usr/bin/env bash
# A throwaway PostgreSQL server on 127.0.0.1 for the results-store tests (tests/results): Debian's
# postgresql, a cluster of its own in $TRAINCLOCK_PG_DIR (never the system's "main" cluster), a
# database and a user with a password. Works without systemd (containers, CI). Idempotent: a
# second call reuses the running server.
#
#   scripts/start_postgres.sh          install if needed, start, print the URL on stdout
#   scripts/start_postgres.sh --stop   stop the server this script started
#
# Only the URL goes to stdout (messages go to stderr), so a caller can write
#   export TRAINCLOCK_TEST_POSTGRES_URL=$(scripts/start_postgres.sh)
# The URL is also left in $TRAINCLOCK_PG_DIR/url.
set -euo pipefail

PG_DIR=${TRAINCLOCK_PG_DIR:-/tmp/trainclock-postgres}
PORT=${TRAINCLOCK_PG_PORT:-55432}
DB_NAME=trainclock_test
DB_USER=trainclock
DB_PASSWORD=trainclock  # a test server that listens on 127.0.0.1 only
DATA=$PG_DIR/data

say() { echo "start_postgres: $*" >&2; }
die() { echo "start_postgres: error: $*" >&2; exit 1; }

server_bin() {
  # the newest installed server version; the client tools alone (postgresql-client) have no initdb
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [[ -n "$dir" && -x "$dir/initdb" ]] && echo "$dir"
}

# the cluster belongs to the postgres user when we are root (the server refuses to run as root)
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

BIN=$(server_bin || true)

if [[ "${1:-}" == "--stop" ]]; then
  if [[ -n "$BIN" && -f "$DATA/postmaster.pid" ]]; then
    as_owner "$BIN/pg_ctl" -D "$DATA" stop -m fast -w >&2 && say "stopped the server in $DATA"
  fi
  exit 0
fi

if [[ -z "$BIN" ]]; then
  [[ $(id -u) -eq 0 ]] || die "PostgreSQL is not installed; run as root to install it with apt-get, or install postgresql"
  command -v apt-get >/dev/null || die "PostgreSQL is not installed and apt-get is missing; install postgresql by hand"
  say "installing postgresql (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends postgresql >&2
  BIN=$(server_bin) || die "apt-get installed postgresql but no initdb is under /usr/lib/postgresql/*/bin"
fi

mkdir -p "$PG_DIR"
[[ $(id -u) -eq 0 ]] && chown postgres:postgres "$PG_DIR"
chmod 700 "$PG_DIR"

if [[ ! -s "$DATA/PG_VERSION" ]]; then
  say "creating a cluster in $DATA"
  rm -rf "$DATA"
  # local (socket) connections need no password, for the setup below; TCP ones need one
  as_owner "$BIN/initdb" -D "$DATA" --username=postgres --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --no-locale --no-sync >/dev/null
fi

if ! as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
    die "port $PORT on 127.0.0.1 is taken by another program; choose a free one with TRAINCLOCK_PG_PORT=<port>"
  fi
  say "starting the server on 127.0.0.1:$PORT"
  # fsync off: a test server whose data may be lost in a crash, and writes much faster for it
  as_owner "$BIN/pg_ctl" -D "$DATA" -l "$PG_DIR/server.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $PG_DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    >/dev/null || die "the server did not start; see $PG_DIR/server.log"
fi

sql() { as_owner "$BIN/psql" -h "$PG_DIR" -p "$PORT" -U postgres -d postgres -v ON_ERROR_STOP=1 -qtAc "$1"; }
if [[ -z $(sql "SELECT 1 FROM pg_roles WHERE rolname = '$DB_USER'") ]]; then
  sql "CREATE ROLE $DB_USER LOGIN PASSWORD '$DB_PASSWORD'" >/dev/null
fi
if [[ -z $(sql "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'") ]]; then
  sql "CREATE DATABASE $DB_NAME OWNER $DB_USER" >/dev/null
fi

url="postgresql://$DB_USER:$DB_PASSWORD@127.0.0.1:$PORT/$DB_NAME"
echo "$url" >"$PG_DIR/url"
say "PostgreSQL $("$BIN/postgres" --version | awk '{print $3}') is up: export TRAINCLOCK_TEST_POSTGRES_URL=$url"
echo "$url"
