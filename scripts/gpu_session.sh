#!/usr/bin/env bash
# The H100 session (docs/gpu_session.md): runs from this checkout with the machine's preinstalled Python, JAX,
# CUDA plugin, flax, jinja2, pyyaml, ml_dtypes and pytest — no network, no uv, no install.
#   bash scripts/gpu_session.sh                 # on the GPU machine: files in docs/gpu-session/, ready to commit
#   bash scripts/gpu_session.sh --dry-run --out /tmp/gs   # every step deviceless on a CPU machine
#   bash scripts/gpu_session.sh --list          # the steps and their time budgets
# The package is the folder harness/fp8_check: harness/ on PYTHONPATH makes it importable. Set PYTHON to choose
# the interpreter.
set -euo pipefail
CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
export PYTHONPATH="$CHECKOUT/harness:$CHECKOUT${PYTHONPATH:+:$PYTHONPATH}"
cd "$CHECKOUT"
"$PY" -c 'import fp8_check, sys; sys.exit(0)' || { echo "gpu_session: cannot import fp8_check from $CHECKOUT/harness/fp8_check with $PY" >&2; exit 3; }
exec "$PY" -m fp8_check.gpu.session "$@"
