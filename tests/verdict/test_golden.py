"""Goldens: field-by-field comparison, version-ranged expectations and atomic blessing."""

from __future__ import annotations

import os

import pytest
import yaml

from fp8_check.core._files import atomic_write
from fp8_check.verdict import _comparator as comparator, _golden as golden

SIG = {
    "kernels": 2,
    "launches": ["fusion kInput [transpose]", "gemm __cublas$lt$matmul$f8"],
    "gemms": [{"target": "__cublas$lt$matmul$f8", "operand_dtypes": ["f8e4m3fn", "f8e4m3fn"], "epilogue": "RELU",
               "damax_output": True, "alpha_real": 1.0}],
    "unfused": ["transpose"],
}


def test_compare_identical_is_empty():
    assert comparator.compare(SIG, yaml.safe_load(yaml.safe_dump(SIG))) == []


def test_compare_reports_each_field_with_path():
    found = {**SIG, "kernels": 3, "gemms": [{**SIG["gemms"][0], "epilogue": "DEFAULT", "alpha_real": 1}]}
    diffs = comparator.compare(SIG, found)
    assert [str(d) for d in diffs] == ["kernels: expected 2, found 3", "gemms[0].epilogue: expected RELU, found DEFAULT"]


def test_compare_missing_and_extra_gemms():
    found = {**SIG, "gemms": SIG["gemms"] + [{"target": "__cublas$gemm"}]}
    diffs = {d.path: d for d in comparator.compare(SIG, found)}
    assert list(diffs) == ["gemms[1]"] and "expected (absent)" in str(diffs["gemms[1]"])
    fewer = {**SIG, "gemms": []}
    assert [str(d) for d in comparator.compare(SIG, fewer)][0].startswith("gemms[0]: expected {")
    assert "found (absent)" in str(comparator.compare(SIG, fewer)[0])


def test_partial_golden_compares_only_stated_fields():
    partial = {"gemms": [{"target": "__cublas$lt$matmul$f8", "epilogue": "RELU"}]}
    assert comparator.compare(partial, {**SIG, "extra": 1}) == []
    found = {**SIG, "gemms": [{**SIG["gemms"][0], "epilogue": "DEFAULT"}]}
    assert [str(d) for d in comparator.compare(partial, found)] == ["gemms[0].epilogue: expected RELU, found DEFAULT"]
    assert [d.path for d in comparator.compare({"kernels": 2, "missing": 1}, SIG)] == ["missing"]


def test_bless_writes_then_reports_unchanged(tmp_path):
    diff = golden.bless(tmp_path, "c", "h100", "cublas", "deviceless", "0.12.0.1", SIG)
    path = golden.path_for(tmp_path, "c", "h100", "cublas", "deviceless")
    assert path.exists() and diff.startswith("--- a/") and "+  signature:" in diff
    g = golden.load(path)
    assert g.expected_for("0.12.0.1").signature == SIG
    assert golden.bless(tmp_path, "c", "h100", "cublas", "deviceless", "0.11.0", SIG) == ""
    changed = golden.bless(tmp_path, "c", "h100", "cublas", "deviceless", "0.12.0.1", {**SIG, "kernels": 1})
    assert "-    kernels: 2" in changed and "+    kernels: 1" in changed


def test_version_ranged_expectations(tmp_path):
    path = golden.path_for(tmp_path, "c", "h100", "cublas", "deviceless")
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump({
        "case": "c", "target": "h100", "profile": "cublas", "mode": "deviceless",
        "expect": [{"jax": "<0.9", "signature": {"kernels": 4}}, {"jax": ">=0.9", "signature": {"kernels": 2}}],
    }))
    g = golden.load(path)
    assert g.expected_for("0.8.0").signature == {"kernels": 4}
    assert g.expected_for("0.12.0.1").signature == {"kernels": 2}
    # blessing on 0.8.0 replaces only the <0.9 expectation and keeps its range
    golden.bless(tmp_path, "c", "h100", "cublas", "deviceless", "0.8.0", {"kernels": 3})
    g = golden.load(path)
    assert [(e.jax, e.signature) for e in g.expect] == [("<0.9", {"kernels": 3}), (">=0.9", {"kernels": 2})]


def test_bad_golden_is_a_one_line_error(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("case: c\nexpect:\n- jax: 'later'\n  signature: {}\n")
    with pytest.raises(golden.GoldenError, match=r"g\.yaml: field 'expect\[0\]\.jax': not a version range"):
        golden.load(path)
    path.write_text("case: c\nexpect: 3\n")
    with pytest.raises(golden.GoldenError, match="expected a list"):
        golden.load(path)


def test_atomic_write_keeps_the_old_file_when_interrupted(tmp_path, monkeypatch):
    path = tmp_path / "g.yaml"
    path.write_text("old golden\n")

    def crash(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, "new golden\n")
    assert path.read_text() == "old golden\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.yaml"], "no temp file left behind"


def test_bless_interrupted_leaves_previous_golden(tmp_path, monkeypatch):
    golden.bless(tmp_path, "c", "h100", "cublas", "deviceless", "0.12.0.1", SIG)
    path = golden.path_for(tmp_path, "c", "h100", "cublas", "deviceless")
    before = path.read_text()
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        golden.bless(tmp_path, "c", "h100", "cublas", "deviceless", "0.12.0.1", {**SIG, "kernels": 9})
    assert path.read_text() == before
    assert [p.name for p in path.parent.iterdir()] == ["c.yaml"]


def test_atomic_write_gives_normal_permissions(tmp_path):
    path = tmp_path / "g.yaml"
    atomic_write(path, "x\n")
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask
