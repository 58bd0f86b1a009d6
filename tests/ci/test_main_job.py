"""CI runs the main job (`fp8-check run`) on the whole shipped library against the shipped goldens, for every
shipped target and profile, on the locked release: every golden file is judged at least once per CI run, and the
README's numbers are checked, not skipped (issue 52: about 675 of the 766 golden files were never compiled in CI).

One run per platform (their plugins live in different environments): NVIDIA (single and multi-GPU), AMD (the
ROCm environment of the newest release with a ROCm plugin, built on first use), Google TPU (libtpu's)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fp8_check.targets import MULTI_DEVICE_TARGETS, platform_of

REPO = Path(__file__).resolve().parents[2]
GOLDENS = REPO / "goldens"


def _golden_rows() -> dict[str, set[tuple[str, str, str]]]:
    """platform -> (case, target, profile) of every shipped golden file (goldens/TARGET/PROFILE/MODE/CASE.yaml)."""
    out: dict[str, set[tuple[str, str, str]]] = {}
    for path in GOLDENS.glob("*/*/deviceless/*.yaml"):
        target, profile = path.parts[-4], path.parts[-3]
        out.setdefault(platform_of(target).name, set()).add((path.stem, target, profile))
    return out


ROWS = _golden_rows()


@pytest.mark.slow
@pytest.mark.parametrize("platform", sorted(ROWS))
def test_every_shipped_golden_is_judged_on_the_locked_release(platform, tmp_path, run_cli):
    wanted = ROWS[platform]
    targets = sorted({t for _c, t, _p in wanted})
    multi = [t for t in targets if t in MULTI_DEVICE_TARGETS]  # their goldens: the sharded cases (rebless.sh's group)
    rows, code, out, err = {}, 0, "", ""
    for chosen, paths in ((sorted(set(targets) - set(multi)), []), (multi, [REPO / "cases" / "sharded.yaml"])):
        if not chosen:
            continue
        json_path = tmp_path / f"r{len(rows)}.json"
        c, o, e = run_cli("run", *paths, "--target", ",".join(chosen), "--json", json_path, "--html",
                          json_path.with_suffix(".html"), "--goldens", GOLDENS)
        code, out, err = max(code, c), out + o, err + e
        rows.update({(r["case"], r["target"], r["profile"]): r for r in json.loads(json_path.read_text())["results"]})
    missing = sorted(wanted - set(rows))
    assert not missing, f"golden files no run judged: {missing[:10]} ({len(missing)})"
    unjudged = sorted((k, rows[k]["outcome"], rows[k]["reason"][:200]) for k in wanted
                      if rows[k]["outcome"] not in ("PASS", "XFAIL"))
    assert not unjudged, unjudged[:10]
    assert code == 0, out[-3000:] + err[-2000:]


@pytest.mark.slow
def test_the_readmes_numbers_are_what_the_main_job_prints(tmp_path, run_cli):
    """README.md's `fp8-check run` block (the default: h100, cublas and triton, the whole library) ends with the
    verdict line a run prints now, and its header names as many cases."""
    readme = (REPO / "README.md").read_text()
    block = readme[readme.index("$ fp8-check run\n"):]
    block = block[:block.index("```")]
    [claimed] = [line for line in block.splitlines() if line.startswith("verdict: ")]
    cases = re.search(r"targets h100, profiles cublas, triton, (\d+) cases", block)
    assert cases, block
    code, out, err = run_cli("run", "--json", tmp_path / "r.json", "--html", tmp_path / "r.html", "--goldens", GOLDENS)
    lines = out.splitlines()
    assert lines[-1] == claimed, lines[-1]
    assert lines[0].startswith("fp8-check: jax ") and f"profiles cublas, triton, {cases.group(1)} cases" in lines[0], \
        lines[0]  # the header first: no requirement set's environment is built for an h100 run
    assert code == 0, err
