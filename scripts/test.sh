#!/usr/bin/env bash
# Sets up gpuarena and passes its tests, lane by lane (tests/lanes.py says what each holds):
#   bash scripts/test.sh                   lint, types and every lane: what CI runs (.ci/run)
#   bash scripts/test.sh --quick           lint, types and the quick lane: minutes
#   bash scripts/test.sh --lane harness    one lane (quick, harness, service or e2e); more
#                                          arguments go to pytest, e.g. -k softmax
# The service and e2e lanes start a throwaway PostgreSQL (installing Debian's package if
# needed) so the service's tests run on SQLite and PostgreSQL; e2e drives Debian's Chromium.
# GPU tests run on a GPU machine with `pytest -m gpu`. Each lane prints its slowest tests.
set -euo pipefail
cd "$(dirname "$0")/.."
lanes="quick harness service e2e"
lint=1
case "${1:-}" in
  --quick) lanes=quick; shift ;;
  --lane) lanes=${2:?--lane needs a lane: quick, harness, service or e2e}; lint=0; shift 2 ;;
esac
say() { echo "test.sh: $*" >&2; }
# Debian's packages need root: apt-get runs as root, or through sudo where sudo asks no password
# (never a prompt); else the script says what to install and goes on with what it can run
can_root() { [ "$(id -u)" = 0 ] || { command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; }; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }
# apt_install WHY PACKAGE...: installs them where it can (an apt-get that fails there stops the
# script, as CI wants); elsewhere it says what to install and returns 1
apt_install() {
  local why=$1
  shift
  if ! can_root; then
    say "not root (and no sudo without a password): install $* yourself for $why (sudo apt-get install $*), then run again"
    return 1
  fi
  say "installing $* from Debian's packages ($why)"
  { as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null &&
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; } || {
    say "apt-get could not install $*"
    exit 1
  }
}
postgres_installed() { ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; }
bash scripts/setup.sh
. .venv/bin/activate
mkdir -p tests/artifacts
started=$SECONDS
failed=()
# Debian's packages for the service and e2e lanes (PostgreSQL, Chromium) install in the background
# while lint and the lanes before them run (about 35 s of apt on a clean machine); the first lane
# that needs them waits, and an apt-get that failed stops the script there
packages=""
case " $lanes " in *" service "*|*" e2e "*)
  {
    postgres_installed || apt_install "the service's tests on PostgreSQL" postgresql || true
    case " $lanes " in *" e2e "*)
      # the web tests drive Debian's Chromium through Playwright (never `playwright install`); without
      # it they fail, saying so, and the lane's other tests run
      [ -x /usr/bin/chromium ] || apt_install "the e2e lane's browser tests" chromium || true ;;
    esac
  } &
  packages=$! ;;
esac
with_packages() {
  [ -n "$packages" ] || return 0
  wait "$packages" || { say "installing Debian's packages failed"; exit 1; }
  packages=""
  if postgres_installed; then
    GPUARENA_TEST_POSTGRES_URL=$(bash scripts/postgres.sh | tail -1)
    export GPUARENA_TEST_POSTGRES_URL GPUARENA_REQUIRE_POSTGRES=1
  else
    say "no PostgreSQL: the service's tests run on SQLite only (their PostgreSQL half is skipped)"
  fi
}
if [ "$lint" = 1 ]; then
  say "lint and types (ruff, mypy)"
  ruff check . || failed+=(ruff)
  ruff format --check . || failed+=("ruff format")
  mypy || failed+=(mypy)
  say "lint and types: $((SECONDS - started)) s"
fi
# two test processes a lane (pytest-xdist), idle ones taking tests from busy ones' queues:
# the harness's verdicts hold with a neighbour judging beside them (bench/redteam_concurrency.py)
parallel=(-n "${GPUARENA_TEST_PROCESSES:-2}" --dist worksteal)
for lane in $lanes; do
  case $lane in service|e2e) with_packages ;; esac
  begun=$SECONDS
  say "lane $lane"
  python -m pytest -q -p no:cacheprovider -m "$lane and not gpu" "${parallel[@]}" "$@" || failed+=("lane $lane")
  say "lane $lane: $((SECONDS - begun)) s"
done
say "all: $((SECONDS - started)) s"
if [ ${#failed[@]} -gt 0 ]; then
  say "failed: ${failed[*]}"
  exit 1
fi
