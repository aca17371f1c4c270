#!/usr/bin/env bash
# One command for the whole test set-up and run: system packages (when missing), the package with
# its test extra, then pytest. Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not browser"`.
set -euo pipefail
cd "$(dirname "$0")/.."

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

PY=${PYTHON:-python3}
# torch>=2.4,<2.14 lets pip take the CPU wheel of torch 2.13 that lies on this kind of machine.
"$PY" -m pip install -q -e ".[test]"

export ALIGNLINGS_HOME="${ALIGNLINGS_HOME:-$(mktemp -d)}"
export PYTHONUNBUFFERED=1
exec "$PY" -m pytest -q -p no:cacheprovider "$@"
