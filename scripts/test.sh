#!/usr/bin/env bash
# Sets up gpuarena and runs the test suite (CPU paths; GPU tests run with `pytest -m gpu`).
# Starts a throwaway PostgreSQL (installing Debian's package if needed) so the service's
# tests run on both SQLite and PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
GPUARENA_TEST_POSTGRES_URL=$(bash scripts/postgres.sh | tail -1)
export GPUARENA_TEST_POSTGRES_URL GPUARENA_REQUIRE_POSTGRES=1
# the web tests drive Debian's Chromium through Playwright (never `playwright install`)
if [ ! -x /usr/bin/chromium ]; then
  echo "installing Chromium from Debian's packages (for tests/web)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
mkdir -p tests/artifacts
python -m pytest -q -p no:cacheprovider "$@"
