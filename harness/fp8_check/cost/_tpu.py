"""A TPU generation's roofline for the cost model (harness/fp8_check/cost/_model.py): the fields of its `Hardware` from the
generation's published per-chip peaks (harness/fp8_check/platforms/tpu/generations.py, each with its page)."""

from __future__ import annotations

import math

TPU_MODEL = ("TPU roofline: each fusion max(matmul FLOPs / the MXU's published peak for its operands' class, "
             "bytes / HBM bandwidth), no launch cost; collectives over half the published bidirectional ICI")


def tpu_hardware(target) -> dict:
    """A TPU generation's roofline from its published per-chip peaks (fp8_check.platforms.tpu.generations, each
    with its source). What is not published is not invented, and is said: an FP8 matmul runs at the bf16 rate
    where no FP8 rate above bf16 is published (v5e, v5p, v6e), an f32 matmul at the bf16 rate (a lower bound: no
    f32 MXU rate is published), a non-matmul fusion by its HBM traffic alone (no vector-unit rate is published)."""
    g = target.platform.generation(target.arch)
    peak = {"bf16": g.bf16_flops, "fp8": g.fp8_flops or g.bf16_flops}
    notes = (TPU_MODEL, f"rates: {g.source}; FP8: {g.fp8_source}",
             "f32 matmuls priced at the bf16 rate (no f32 MXU rate is published: a lower bound); non-matmul fusions "
             "by HBM traffic only (no vector-unit rate is published)")
    return {"name": f"{g.product} (TPU roofline)", "hbm": g.hbm_bytes_per_s, "fp32": math.inf, "peak": peak,
            "link": g.ici_bytes_per_s / 2, "launch_us": 0.0, "notes": notes, "matmul_unit": "MXU", "link_name": "ICI",
            "model": TPU_MODEL}
