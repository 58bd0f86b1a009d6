#!/usr/bin/env bash
# Set up (or reuse) the locked environment, then run a command inside it.
#   bash scripts/env.sh fp8-check run      # the main job
#   bash scripts/env.sh pytest             # the test suite
# Needs only a Python >= 3.12 on the machine; installs uv (once, quietly) if it is missing.
# The command runs in the caller's directory: relative paths resolve where you stand, e.g.
#   cd ~/myproject && bash ~/fp8-check/scripts/env.sh fp8-check list mycases
# Installs what deviceless compiles need (JAX, jaxlib, the CUDA plugin, ptxas; the other extras,
# e.g. flax for the flax cases; the dev group for the tests), not NVIDIA's runtime wheels: for device mode on a
# GPU host (`--mode device`, `run --numerics`) set FP8_CHECK_DEVICE=1 (the `device` extra).
set -euo pipefail
CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

find_python() {
  local c
  for c in "${UV_PYTHON:-}" python3.12 python3.13 python3 \
           "$(command -v pyenv >/dev/null 2>&1 && pyenv root)"/versions/3.1[2-9]*/bin/python3 \
           /usr/bin/python3.12 /usr/local/bin/python3.12; do
    [ -n "$c" ] || continue
    if "$c" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; then
      "$c" -c 'import sys; print(sys.executable)'
      return 0
    fi
  done
  return 1
}

PY=$(find_python) || { echo "fp8-check: needs Python >= 3.12 (none found on PATH or under pyenv)" >&2; exit 2; }
export UV_PYTHON="$PY" UV_PYTHON_DOWNLOADS=never

if ! command -v uv >/dev/null 2>&1; then
  # pip's --user scripts directory is often not on PATH: look there before installing again
  USER_BIN="$("$PY" -c 'import site; print(site.USER_BASE)')/bin"
  export PATH="$USER_BIN:$PATH"
  if ! command -v uv >/dev/null 2>&1; then
    echo "fp8-check: installing uv (pip install --user uv)" >&2
    export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
    "$PY" -m pip install --quiet --user uv >&2 || "$PY" -m pip install --quiet uv >&2
    command -v uv >/dev/null 2>&1 || export PATH="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
  fi
fi

EXTRAS=(--all-extras --no-extra device)
[ "${FP8_CHECK_DEVICE:-0}" = 1 ] && EXTRAS=(--all-extras)
# --compile-bytecode: JAX's modules are compiled once here, not at every import (importing JAX took
# 1.6 s of CPU without, 0.6 s with; each compile worker imports it)
uv sync --project "$CHECKOUT" --locked "${EXTRAS[@]}" --compile-bytecode --quiet >&2
exec uv run --project "$CHECKOUT" --locked "${EXTRAS[@]}" --no-sync "$@"
