"""TPU answers as sharp as the GPU's (issue 56): the no-FP8 reason per platform and cause, the FP8 layers that are
not FP8 on a TPU named with the cause and the fix, the per-generation FP8 wording from the platform's data.

The unit tests read typed signatures; the slow test compiles docs/examples/tpu_train (a flax train step with
Fp8DirectDotGeneralOp layers and one Fp8DotGeneralOp layer) deviceless through libtpu.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from fp8_check.platforms.tpu import TPU
from fp8_check.platforms.tpu.generations import GENERATIONS
from fp8_check.run import _results as results
from fp8_check.signature._extract import Gemm, Signature
from fp8_check.targets import load_target
from fp8_check.verdict._fp8_answer import Fp8Answer, lost_layers, reason
from tests.conftest import REPO


def _tpu(layer: str, pass_: str, fp8: bool) -> Gemm:
    return Gemm(target="fusion kOutput", operand_dtypes=["f8e4m3fn"] * 2 if fp8 else ["bf16"] * 2, output="bf16",
                matmul_op="convolution", converts=[] if fp8 else ["f8e4m3fn->bf16"], layer=layer, pass_=pass_)


DEQUANT = Signature(3, [], [_tpu("m/dense", "forward", False)], [])


@pytest.mark.parametrize("target", ["v5e", "v5p", "v6e", "tpu7x"])
def test_a_tpu_matmul_fed_by_a_dequantize_pattern_says_the_compiler_does_not_fold_it_and_how_to_keep_fp8(target):
    text = reason(DEQUANT, ("f8e4m3fn",), load_target(target))
    assert "XLA's TPU compiler does not fold dequantize -> dot" in text, text
    assert "Fp8DirectDotGeneralOp" in text and "qwix.PtqProvider" in text
    # never the GPU wording, on any generation
    assert "tensor cores" not in text and "expected on this GPU" not in text and "did not match" not in text
    g = GENERATIONS[target]
    if g.fp8_flops:  # tpu7x: its published FP8 rate, with the source
        assert f"{g.fp8_flops / 1e12:.0f} TFLOP/s FP8" in text and g.source in text
    else:  # v5e, v5p, v6e: no FP8 rate, their int8 and bf16 rates, the widening caveat
        assert "publishes no FP8 rate" in text and f"{g.int8_ops / 1e12:.0f} TOPS int8" in text
        assert "widened inside the MXU" in text and g.source in text


def test_the_gpu_reasons_are_unchanged():
    gpu = Signature(3, [], [Gemm(target="__cublas$gemm", operand_dtypes=["bf16", "bf16"], output="bf16")], [])
    assert "has no FP8 tensor cores" in reason(gpu, ("f8e4m3fn",), load_target("a100"))
    assert "a pattern it did not match" in reason(gpu, ("f8e4m3fn",), load_target("h100"))
    assert TPU.fp8_capability("nope") == ""


def test_an_fp8_layer_not_fp8_on_tpu_is_named_with_its_passes_cause_and_fix():
    sig = Signature(6, [], [
        _tpu("Model/block0/up/Fp8DirectDotGeneralOp_0", "forward", True),
        _tpu("Model/block1/up/Fp8DotGeneralOp_0", "forward", False),
        _tpu("Model/block1/up/Fp8DotGeneralOp_0", "backward-weight", False),
        _tpu("Model/head", "forward", False),  # plain by design: no FP8 op, no FP8 pass
        _tpu("Model/mixed", "forward", True), _tpu("Model/mixed", "backward-input", False),
    ], [])
    lost = lost_layers(sig, ("f8e4m3fn", "f8e5m2"), load_target("v6e"))
    assert len(lost) == 2, lost
    assert lost[0].startswith("Model/block1/up/Fp8DotGeneralOp_0 (forward, backward-weight): fed by a dequantize")
    assert "does not fold" in lost[0] and "Fp8DirectDotGeneralOp" in lost[0]
    assert lost[1].startswith("Model/mixed (backward-input)")
    a = Fp8Answer(6, 2, 0.5, ("f8e4m3fn",), "", False, lost)
    assert a.warns and a.line().startswith("not FP8 in 2 FP8 layers: Model/block1/up/Fp8DotGeneralOp_0")
    assert not Fp8Answer(6, 2, 0.5, ("f8e4m3fn",), "", False, lost, layers_by_design=True).warns
    # on a GPU the same layer is named with XLA's missed rewrite
    gpu = lost_layers(sig, ("f8e4m3fn",), load_target("h100"))
    assert gpu and "rewrote its matmul into no FP8 gemm" in gpu[0]
    assert lost_layers(sig, (), load_target("v6e")) == ()  # no FP8 in the program: nothing asked for


EXAMPLE = REPO / "docs" / "examples" / "tpu_train"


@pytest.mark.slow
def test_the_tpu_train_step_names_its_qdq_layer_then_a_direct_layer_made_plain_fails(tmp_path, run_cli, monkeypatch):
    """docs/examples/tpu_train through libtpu: `check --target v6e,tpu7x` names the Fp8DotGeneralOp layer as not
    FP8 with the cause and the fix in the FP8-first lines; `bless` writes its layer rules; a Direct layer made
    plain is then a FAIL naming it (and an estimate from the TPU roofline)."""
    work = tmp_path / "tpu_train"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "fp8_check.cli.main", "check", "model:train_step", "--args",
                           "model:train_args", "--target", "v6e,tpu7x", "--json", "c.json"], cwd=work,
                          capture_output=True, text=True, timeout=1500, env={**os.environ, "PYTHONPATH": str(work)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for target in ("v6e", "tpu7x"):
        at = next(i for i, x in enumerate(lines) if re.match(rf"(PASS|COMPILED) +{target}/tpu ", x))  # no golden: COMPILED
        assert re.search(r"FP8 \d+/\d+", lines[at]), lines[at]
        first = lines[at + 1]  # the FP8-first line, right under the result
        assert "not FP8 in 1 FP8 layer: Model/block1/up/Fp8DotGeneralOp_0 (forward, backward-input, backward-weight)" \
            in first, first
        assert "does not fold dequantize -> dot" in first and "Fp8DirectDotGeneralOp" in first, first
    assert "estimate:" in proc.stdout and "TPU roofline" in proc.stdout, proc.stdout

    code, out, err = run_cli("bless", "cases", "--goldens", "goldens", "--target", "v6e", cwd=work)
    assert code == 0, out + err
    assert "layer rules written for v6e/tpu tpu_train_direct" in out and "  Model/block0/down/*: FP8" in out, out
    assert "Model/block1/up/*" not in out.split("layer rules written", 1)[1].split("\n---", 1)[0]  # never FP8 here
    model = work / "model.py"
    model.write_text(model.read_text().replace('PLAIN: tuple[str, ...] = ()', 'PLAIN: tuple[str, ...] = ("block0/down",)'))
    monkeypatch.delitem(sys.modules, "model", raising=False)
    code, out, err = run_cli("run", "cases", "--goldens", "goldens", "--target", "v6e", "--json", "r.json", cwd=work)
    assert code == 1, out + err
    [o] = results.load(work / "r.json").outcomes
    assert o.code.name == "FAIL" and o.verdict.cls == "regression"
    for pass_ in ("forward", "backward-input", "backward-weight"):
        assert f"Model/block0/down {pass_}: FP8 -> bf16 (TPU matmul bf16)" in o.reason, o.reason
    assert o.estimate is not None and "TPU roofline" in o.estimate.hardware


def test_a_multi_device_target_whose_program_is_not_partitioned_says_so_in_one_line():
    from fp8_check.report import unsharded_note
    from fp8_check.verdict import PASS, Outcome

    def out(target: str, header: str) -> Outcome:
        return Outcome("c", target, "tpu", "deviceless", "0.12.0.1", PASS, hlo=header + "\n\nENTRY %main () -> f32[] {\n}\n")

    one = "HloModule jit_fp8_dot, is_scheduled=true, entry_computation_layout={(f8e4m3fn[256,512])->f32[256,256]}"
    sharded = "HloModule jit_fsdp, is_scheduled=true, num_partitions=8"  # as libtpu prints tpu_fsdp_fp8_weights_k
    note = unsharded_note(out("tpu7x-2x2x1", one))
    assert note.startswith("no sharding: tpu7x-2x2x1 has 8 devices but the program is not partitioned") and "\n" not in note
    assert unsharded_note(out("h100x8", one)).startswith("no sharding: h100x8 has 8 devices")  # a GPU target alike
    assert unsharded_note(out("tpu7x-2x2x1", sharded)) == ""
    assert unsharded_note(out("tpu7x-2x2x1", one.replace("is_scheduled", "num_replicas=8, is_scheduled"))) == ""
    assert unsharded_note(out("v6e", one)) == ""  # one chip: nothing to say
