#!/usr/bin/env bash
# The H100 session (docs/gpu_session.md): runs from this checkout with the machine's preinstalled Python, JAX,
# CUDA plugin, flax, jinja2, pyyaml, ml_dtypes and pytest — no network, no uv, no install.
#   bash scripts/gpu_session.sh                 # on the GPU machine: files in docs/gpu-session/, ready to commit
#   bash scripts/gpu_session.sh --dry-run --out /tmp/gs   # every step deviceless on a CPU machine
#   bash scripts/gpu_session.sh --list          # the steps and their time budgets
# The code lives in harness/ and is imported as fp8_check: a link fp8_check -> harness/ in a temporary
# directory on PYTHONPATH makes it importable (the same mapping as packaging/editable, made here so that a
# copy of the checkout that dropped symlinks still works). Set PYTHON to choose the interpreter.
set -euo pipefail
CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
LINKS="$(mktemp -d "${TMPDIR:-/tmp}/fp8-check-session-XXXXXX")"
trap 'rm -rf "$LINKS"' EXIT
ln -s "$CHECKOUT/harness" "$LINKS/fp8_check"
export PYTHONPATH="$LINKS:$CHECKOUT${PYTHONPATH:+:$PYTHONPATH}"
cd "$CHECKOUT"
"$PY" -c 'import fp8_check, sys; sys.exit(0)' || { echo "gpu_session: cannot import fp8_check from $CHECKOUT/harness with $PY" >&2; exit 3; }
exec "$PY" -m fp8_check.gpu.session "$@"
