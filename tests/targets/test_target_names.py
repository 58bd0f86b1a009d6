"""Targets have one name each: a case's `targets:` takes any GPUxN / GPUxHOSTSxN that `--target` takes, in one
normal form (`h100x08` is `h100x8`); a user's one-GPU spec named like ANY multi-GPU target (`h100x4.txtpb`, not
only the three the library ships goldens for) is refused, not judged against the generated 4-GPU goldens."""

from __future__ import annotations

import shutil

import pytest

from fp8_check.cases import _load as cases
from fp8_check.targets import TARGET_DIR, canonical_target, load_target

CASE = """cases:
  - id: c
    dequant: float32
    input_scales: both
    output_scale: none
    clamp: false
    out_dtype: float32
    targets: {targets}
"""


@pytest.mark.parametrize("given,normal", [("[h100x4]", ("h100x4",)), ("[h100x08, b200]", ("h100x8", "b200")),
                                          ("h100x02x4", ("h100x2x4",))])
def test_a_case_takes_any_gpu_x_n_in_its_normal_form(tmp_path, given, normal):
    path = tmp_path / "c.yaml"
    path.write_text(CASE.format(targets=given))
    [case] = cases.load([path])
    assert case.targets == normal


@pytest.mark.parametrize("given,message", [("[h100x8, h100x08]", "names one target twice"),
                                           ("[h100x1]", "allowed: "), ("[h100x65]", "GPUxN")])
def test_a_case_refuses_a_target_twice_or_not_a_target(tmp_path, given, message):
    path = tmp_path / "c.yaml"
    path.write_text(CASE.format(targets=given))
    with pytest.raises(cases.CaseError, match=message):
        cases.load([path])


def test_one_normal_form_everywhere():
    assert load_target("h100x08").name == load_target("h100x8").name == "h100x8"
    assert canonical_target("h100x2x04") == "h100x2x4" and canonical_target("h100") == "h100"
    assert canonical_target("h100x1") is None and canonical_target("nosuchgpux4") is None


def test_a_one_gpu_spec_named_like_a_multi_gpu_target_is_refused(tmp_path):
    spec = tmp_path / "h100x4.txtpb"
    shutil.copyfile(TARGET_DIR / "h100.txtpb", spec)
    with pytest.raises(KeyError, match="named like the shipped target 'h100x4' but a different spec"):
        load_target(str(spec))
