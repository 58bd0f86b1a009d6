"""Callables for `kind: python` test cases (imported by the compile worker)."""

import os

import jax.numpy as jnp


def crash(a, b):
    """Kills the worker process the way an XLA CHECK failure does."""
    os.abort()


def raises(a, b):
    raise ValueError("this case is broken on purpose")


def plain(a, b):
    return jnp.dot(a.astype(jnp.float32), b.astype(jnp.float32))


def sleeps(a, b):
    """Never finishes in time: for --timeout and signal tests (the worker is busy in it)."""
    import time

    time.sleep(600)
    return plain(a, b)
