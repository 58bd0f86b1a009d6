#!/usr/bin/env bash
# The test suite, from a fresh machine: installs what the suite needs, runs ruff over harness/ and tests/, mypy over harness/
# (configured in pyproject.toml; either failing fails the run), then runs pytest.
#   bash scripts/test.sh            # everything
#   bash scripts/test.sh -k golden  # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."

# Headless Chromium (Debian's package) for the HTML report's browser tests.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  echo "test.sh: installing chromium (Debian package) for the report's browser tests" >&2
  ($SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null) \
    || echo "test.sh: could not install chromium; the browser tests will fail" >&2
fi

# Static checks first: they take seconds and say exactly what is wrong.
bash scripts/env.sh ruff check harness tests
bash scripts/env.sh mypy
exec bash scripts/env.sh pytest "$@"
