#!/usr/bin/env bash
# Re-bless the case library over every release it claims, per target group, when a JAX release comes out:
#   1. python -m fp8_check.versions.xla_commits --update   (the release table: which releases exist)
#   2. bash scripts/rebless.sh [GROUP ...]                 (this script; default: every group)
#      bash scripts/rebless.sh --plan [GROUP ...]          (what each group's matrix would run; installs nothing)
#   3. review `git diff goldens/`, commit
#
# Each group runs `fp8-check matrix` over its targets' claimed releases (the shipped release table, less those the
# platform has no plugin for: fp8_check.matrix._goldens.claimed_releases) and every non-model case file, blesses
# from it (`bless --from-matrix`: each range ends at the last measured release, so every boundary sits where XLA
# changed), runs the matrix again (from the compile cache: judging only) and writes the before/after tables:
#   OUT/<group>-before.json, OUT/<group>-after.json, OUT/<group>-table.md        (OUT: $REBLESS_OUT or reports/rebless)
# Groups (each is one environment set):
#   nvidia   h100, h200, b200, a100 (flax and optax per release)     amd   mi300x, mi350x (ROCm plugin releases)
#   multi    h100x8, b200x4, h100x2x4 (the sharded cases)
# Cost, measured on a 2-core machine shared with six other jobs (docs/goldens.md has the numbers): nvidia 42 min from
# a warm h100 cache (b200/h200/a100 compiled; 20 environments with flax and optax: 16 GB), amd 337 s cold (9 ROCm
# environments: 12 GB), multi 4 min; each warm matrix 15 s - 3 min; the compile cache 56 MB.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${REBLESS_OUT:-reports/rebless}"
PLAN=0
if [ "${1:-}" = "--plan" ]; then PLAN=1; shift; fi
[ "$PLAN" = 1 ] || mkdir -p "$OUT"
GROUPS_WANTED=("$@")
[ ${#GROUPS_WANTED[@]} -gt 0 ] || GROUPS_WANTED=(nvidia amd multi)

fp8() { bash scripts/env.sh fp8-check "$@"; }
releases() {  # the claimed releases of a target, comma-separated
  bash scripts/env.sh python -c "import sys; from fp8_check.matrix._goldens import claimed_releases; print(','.join(claimed_releases(sys.argv[1])))" "$1"
}
case_files() {  # every case file but the models (their contracts are blessed on their own: docs/models.md)
  ls cases/*.yaml | grep -v -e '/models\.yaml$'
}

one_group() {
  local group="$1" targets files extra
  case "$group" in
    nvidia) targets="h100,h200,b200,a100"; files="$(case_files | grep -v -e '/amd\.yaml$')"; extra=(--with flax --with optax) ;;
    amd) targets="mi300x,mi350x"; files="$(case_files)"; extra=() ;;
    multi) targets="h100x8,b200x4,h100x2x4"; files="cases/sharded.yaml"; extra=() ;;
    *) echo "rebless.sh: unknown group '$group' (nvidia, amd, multi)" >&2; return 2 ;;
  esac
  local jax
  jax="$(releases "${targets%%,*}")"
  echo "rebless.sh: $group: targets $targets, jax $jax" >&2
  if [ "$PLAN" = 1 ]; then  # the same matrix, planned only: every release must run its cases
    # shellcheck disable=SC2086
    fp8 matrix $files --target "$targets" --jax "$jax" --mode deviceless "${extra[@]}" --plan
    return 0
  fi
  # shellcheck disable=SC2086
  fp8 matrix $files --target "$targets" --jax "$jax" --mode deviceless "${extra[@]}" \
    --out "$OUT/$group-before.json" --no-html --fail-on never
  fp8 bless --from-matrix "$OUT/$group-before.json" --target "$targets" > "$OUT/$group-bless.log"
  tail -n 1 "$OUT/$group-bless.log" >&2
  # shellcheck disable=SC2086
  fp8 matrix $files --target "$targets" --jax "$jax" --mode deviceless "${extra[@]}" \
    --out "$OUT/$group-after.json" --no-html --fail-on never
  bash scripts/env.sh python scripts/matrix_table.py "$OUT/$group-before.json" "$OUT/$group-after.json" \
    > "$OUT/$group-table.md"
  echo "rebless.sh: $group: table in $OUT/$group-table.md" >&2
}

for g in "${GROUPS_WANTED[@]}"; do
  one_group "$g"
done
