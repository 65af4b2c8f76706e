#!/usr/bin/env bash
# Sets up gpuarena and runs the whole platform on this machine, with embedded defaults: the
# web pages and the JSON API on http://127.0.0.1:8000, SQLite in .gpuarena/ (GPUARENA_HOME),
# the bundled problems, and a runner for the CPU and each GPU present. The first start makes
# an admin account and prints its token (kept in $GPUARENA_HOME/admin-token): paste it on
# the sign-in page. Stop with Ctrl-C; jobs in flight are re-queued on the next start.
#   GPUARENA_HOST, GPUARENA_PORT: where to listen (default 127.0.0.1:8000)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh serve  # gpuarena and its service (.[server]), not the test extras
. .venv/bin/activate
export GPUARENA_HOME=${GPUARENA_HOME:-$PWD/.gpuarena}
mkdir -p "$GPUARENA_HOME"
gpuarena db upgrade
token_file=$GPUARENA_HOME/admin-token
if [ ! -s "$token_file" ]; then
  (umask 077; gpuarena users add admin --role admin 2>/dev/null | tail -1 > "$token_file")
fi
host=${GPUARENA_HOST:-127.0.0.1} port=${GPUARENA_PORT:-8000}
echo
echo "gpuarena on http://$host:$port/  (API docs: http://$host:$port/docs)"
echo "admin token (sign in with it; also in $token_file):"
cat "$token_file"
echo
exec gpuarena serve --host "$host" --port "$port"
