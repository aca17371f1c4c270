#!/usr/bin/env bash
# The one command that sets up and runs the checks: system packages (when missing), the package with
# its test extra, then
#   no arguments     every stage in CI's order: lint (ruff check, mypy), fast tests, slow and browser tests
#   stage names      only those, in the order given: lint | fast | slow    (`bash scripts/test.sh lint fast`)
#   anything else    arguments for pytest, as is            (`bash scripts/test.sh -m "not browser" -x`)
# ALIGNLINGS_SKIP_INSTALL=1 skips the installs (a quick rerun). A stage that selects no tests
# (pytest's exit 5, e.g. no browser tests where chromium is missing) passes and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

if [ "${ALIGNLINGS_SKIP_INSTALL:-0}" != 1 ]; then
  need=()
  [ -x /usr/bin/chromium ] || need+=(chromium)
  command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
  fc-list 2>/dev/null | grep -qi "wenquanyi\|wqy" || need+=(fonts-wqy-microhei)
  if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
      echo "installing system packages: ${need[*]}"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
    else
      echo "missing system packages (${need[*]}): run as root or install them; dependent tests will skip" >&2
    fi
  fi
  # torch>=2.4,<2.14 lets pip take the CPU wheel of torch 2.13 that lies on this kind of machine.
  "$PY" -m pip install -q -e ".[test]"
fi

export ALIGNLINGS_HOME="${ALIGNLINGS_HOME:-$(mktemp -d)}"
export PYTHONUNBUFFERED=1
# Where this script could install everything (root, or CI), a skipped test means a broken set-up:
# tests/conftest.py then reports every skip as a failure, except tests marked needs_cuda.
if [ -z "${ALIGNLINGS_STRICT:-}" ]; then
  if [ "$(id -u)" = 0 ] || [ "${CI:-}" = true ]; then export ALIGNLINGS_STRICT=1; else export ALIGNLINGS_STRICT=0; fi
fi

# PostgreSQL for tests/test_classroom_pg.py: Debian's postgresql (installed when missing, as root),
# its cluster started, a fresh database made and ALIGNLINGS_TEST_DATABASE_URL exported; stopped
# again when the tests end. Not root, or a URL already set: nothing is done (the tests skip
# without the variable, saying why).
PG_STARTED=""
pg_setup() {
  [ -n "${ALIGNLINGS_TEST_DATABASE_URL:-}" ] && return 0
  [ "$(id -u)" = 0 ] || { echo "not root: PostgreSQL tests will skip" >&2; return 0; }
  if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    if [ "${ALIGNLINGS_SKIP_INSTALL:-0}" = 1 ]; then echo "no PostgreSQL: its tests will skip" >&2; return 0; fi
    echo "installing system packages: postgresql"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null || { echo "could not install postgresql" >&2; return 0; }
  fi
  local major
  major=$(ls /usr/lib/postgresql | sort -n | tail -1)
  [ -d "/etc/postgresql/$major/main" ] || pg_createcluster "$major" main >/dev/null || return 0
  if ! pg_ctlcluster "$major" main status >/dev/null 2>&1; then
    pg_ctlcluster "$major" main start || { echo "could not start PostgreSQL $major" >&2; return 0; }
    PG_STARTED=$major
  fi
  local port
  port=$(pg_lsclusters -h | awk -v v="$major" '$1 == v && $2 == "main" {print $3}')
  local db="alignlings_test_$$" password
  password=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
  # what an interrupted earlier run left behind: its databases first, then the role that owns them
  local old
  for old in $(runuser -u postgres -- psql -Atq -c "SELECT datname FROM pg_database WHERE datname LIKE 'alignlings_test_%'" 2>/dev/null); do
    runuser -u postgres -- dropdb --if-exists "$old" >/dev/null 2>&1 || true
  done
  runuser -u postgres -- psql -q -c "DROP ROLE IF EXISTS alignlings_test" >/dev/null 2>&1 || true
  runuser -u postgres -- psql -q -c "CREATE ROLE alignlings_test LOGIN PASSWORD '$password'" >/dev/null || return 0
  runuser -u postgres -- createdb -O alignlings_test "$db" || return 0
  PG_DB=$db
  export ALIGNLINGS_TEST_DATABASE_URL="postgresql://alignlings_test:$password@127.0.0.1:${port:-5432}/$db"
  echo "PostgreSQL $major: database $db for the tests"
}
pg_teardown() {
  if [ -n "${PG_DB:-}" ]; then
    runuser -u postgres -- dropdb --if-exists "$PG_DB" >/dev/null 2>&1 || true
  fi
  if [ -n "$PG_STARTED" ]; then pg_ctlcluster "$PG_STARTED" main stop >/dev/null 2>&1 || true; fi
}
trap pg_teardown EXIT
pg_setup

# pytest with the shared options; exit 5 (nothing selected) counts as a pass for a stage
run_pytest() {
  local what=$1; shift
  local rc=0
  "$PY" -m pytest -q -p no:cacheprovider --durations=20 "$@" || rc=$?
  if [ "$rc" = 5 ]; then
    echo "== $what: no tests selected"
    return 0
  fi
  return "$rc"
}

# (set -e does not apply inside a function called with ||, so every step checks its own status)
stage() {
  case "$1" in
    lint)
      echo "== lint: ruff check, mypy"
      "$PY" -m ruff check || return
      "$PY" -m mypy || return ;;
    fast)
      echo "== fast tests"
      run_pytest "fast tests" -m "not slow and not browser" || return ;;
    slow)
      echo "== slow and browser tests"
      run_pytest "slow and browser tests" -m "slow or browser" || return ;;
  esac
}

if [ $# -eq 0 ]; then
  set -- lint fast slow
fi
case "$1" in
  lint|fast|slow)
    for s in "$@"; do
      case "$s" in
        lint|fast|slow) ;;
        *) echo "unknown stage '$s' (stages: lint, fast, slow)" >&2; exit 2 ;;
      esac
    done
    for s in "$@"; do
      rc=0
      stage "$s" || rc=$?
      if [ "$rc" != 0 ]; then
        echo "== stage '$s' failed (exit $rc)" >&2
        exit "$rc"
      fi
    done ;;
  *)
    rc=0
    "$PY" -m pytest -q -p no:cacheprovider "$@" || rc=$?
    if [ "$rc" = 5 ]; then echo "no tests selected by: $*" >&2; fi
    exit "$rc" ;;
esac
