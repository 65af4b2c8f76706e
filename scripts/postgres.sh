#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server for tests and benchmarks (installing Debian's package
# if it is missing) and prints its URL on the last line. Idempotent: a server already
# running on the port is reused.  Usage: bash scripts/postgres.sh [PORT]
set -euo pipefail
PORT=${1:-${GPUARENA_PG_PORT:-55432}}
DATA=${GPUARENA_PG_DATA:-/tmp/gpuarena-postgres-$PORT}
URL="postgresql://postgres@127.0.0.1:$PORT/postgres"

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
if [ -z "$(bindir)" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "PostgreSQL is not installed: sudo apt-get install postgresql, then run this again" >&2
    exit 1
  fi
  echo "installing PostgreSQL from Debian's packages" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq postgresql >/dev/null
fi
BIN=$(bindir)
# PostgreSQL refuses to run as root: run it as the postgres account when we are root
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

if as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
  echo "$URL"; exit 0
fi
if [ ! -f "$DATA/PG_VERSION" ]; then
  mkdir -p "$DATA"
  [ "$(id -u)" = 0 ] && chown postgres: "$DATA"
  as_pg "$BIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 >/dev/null
fi
as_pg "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w \
  -o "-p $PORT -k /tmp -c listen_addresses=127.0.0.1 -c fsync=${GPUARENA_PG_FSYNC:-off} -c max_connections=200" start >/dev/null
echo "$URL"
