"""A sharded case's `out_shardings` checked against the outputs its function returns, before lowering.

Self-contained (standard library + JAX): `aot` uses it, and a repro script carries its source before aot's
(harness/fp8_check/compile/_render.py). JAX's own error for specs that do not fit named neither the field nor the
output.
"""


def check_out_specs(fn, specs, out_specs):
    """`out_shardings` (None: none given) against the outputs `fn` returns for `specs` (traced with eval_shape):
    ValueError naming the field and the output, not JAX's error."""
    import jax

    if out_specs is None:
        return
    leaves = jax.tree_util.tree_leaves(jax.eval_shape(fn, *specs))
    if len(out_specs) not in (1, len(leaves)):
        raise ValueError("out_shardings: %d partition specs for %d outputs; give one (for every output) or one per "
                         "output" % (len(out_specs), len(leaves)))
    for i, leaf in enumerate(leaves):
        at = 0 if len(out_specs) == 1 else i
        if len(out_specs[at] or []) > len(leaf.shape):
            raise ValueError("out_shardings[%d]: %d entries for output %d of rank %d (shape %s)"
                             % (at, len(out_specs[at]), i, len(leaf.shape), tuple(leaf.shape)))
