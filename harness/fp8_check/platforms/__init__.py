"""Platforms: everything that differs between accelerator families, one module or folder each (`nvidia`, `amd`,
`tpu/`), in an open registry as JAX registers its backends (`register`, in the order they are asked).

A `Platform` owns its JAX platform name, its plugin and wheel names per JAX version, the targets it names
(GPU specs are shipped *.txtpb files; TPU generations and topologies are its own data) and how a spec names the
architecture, how to make compile-only devices for a target, the environment a deviceless compile needs, its
profiles and the one its canary compiles under, its default target and profile, its spec's version header lines,
its canary probes, its matmul forms (gemm custom-calls with family, engine label and FP8-ness; fused TPU
convolutions), which FP8 types and features an architecture has, and its cost-model rates. The rest of fp8-check
asks a platform (`of_spec`, `of_target`, `by_name`, `registered`, `profiles`) and names none itself:
tests/platforms/test_platforms.py fails on a platform literal anywhere else in harness/. A spec no platform claims is
refused (`UnknownSpec`), never taken for NVIDIA's.

The registry is read when asked, never frozen: a platform `register`ed from anywhere (a test, a plugin) is seen by
every later lookup. Platforms outside this tree register through the entry-point group `fp8_check.platforms`
(each entry names a `Platform` object, or a callable returning one), loaded once, on the first lookup (one that
fails is skipped with a warning); the compile worker loads the same entry points in its own process
(tests/platforms/test_fourth_platform.py), so a platform that compiles must come so: a `register` call reaches its own
process only.

This package is imported by the compile worker inside per-version JAX environments: standard
library only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._amd import AMD, ARCH_NAME
    from ._base import GemmTypeTable, Platform, Probe, Profile
    from ._nvidia import DEVICE, DEVICE_MARKER, DEVICE_NODE, DEVICELESS, NVIDIA, SLIM_EXTRAS, SMI, slim_extras
    from ._registry import (
        DEFAULT,
        ENTRY_POINTS,
        UnknownSpec,
        by_name,
        default_profile,
        default_target,
        deviceless_environment,
        engine_of,
        literals,
        matmul_ops,
        of_spec,
        of_targets,
        plugin_versions,
        prepare_deviceless,
        profiles,
        register,
        registered,
        target_specs,
    )
    from .tpu import TPU
else:
    __getattr__, __dir__, __all__ = attach(__name__)
