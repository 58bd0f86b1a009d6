"""A change between two releases gets a JAX commit range beside the XLA range when JAX's lowering changed (the
StableHLO differs), from what the installed jax/jaxlib distributions record, else the shipped table; no network."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fp8_check.upstream._bisect import lowering_changed
from fp8_check.verdict._outcome import NEW, Outcome
from fp8_check.versions import xla_commits


def _lowered(fn, debug_info: bool) -> str:
    x = jax.ShapeDtypeStruct((16, 32), jnp.float8_e4m3fn)
    w = jax.ShapeDtypeStruct((32, 16), jnp.float8_e4m3fn)
    return jax.jit(fn).lower(x, w).as_text(debug_info=debug_info)


def _out(stablehlo: str | None) -> Outcome:
    return Outcome("c", "h100", "cublas", "deviceless", "0.12.0.1", NEW, stablehlo=stablehlo)


def f32_dot(a, b):
    return jnp.dot(a.astype(jnp.float32), b.astype(jnp.float32))


def bf16_dot(a, b):
    return jnp.dot(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16))


def test_the_stablehlo_decides_whether_jax_lowering_changed_source_locations_aside():
    plain, located = _lowered(f32_dot, False), _lowered(f32_dot, True)
    assert "loc(" in located and plain != located
    assert lowering_changed(_out(plain), _out(located)) is False
    assert lowering_changed(_out(plain), _out(_lowered(bf16_dot, False))) is True
    assert lowering_changed(_out(plain), _out(None)) is None


def test_the_jax_range_beside_the_xla_range_names_jax_commits():
    table = xla_commits.load()
    good, bad = "0.10.2", "0.11.0"
    rng = xla_commits.jax_range(good, bad, table)
    # the installed distributions record the commit the release was built from: the table's (from the wheels)
    assert (rng.good, rng.bad) == (table[good].jax_commit, table[bad].jax_commit)
    assert rng.text().startswith(f"JAX {rng.good[:12]}..{rng.bad[:12]} (") and "jax-ml/jax/compare/" in rng.text()
    assert xla_commits.xla_range(good, bad, table).text().startswith("XLA ")
    unknown = xla_commits.jax_range("0.0.1", "0.0.2", {})  # never released: nothing installed, nothing recorded
    assert not unknown.known and unknown.text() == "JAX commit range unknown (no JAX commit recorded for jax 0.0.1, 0.0.2)"
