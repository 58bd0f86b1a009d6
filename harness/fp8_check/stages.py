"""The package's stages, bottom to top: the folder list of `fp8_check`, in the order a case travels.

A module may import modules of its own stage and of the stages listed before it, never of one listed
after it (tests/house/test_layers.py enforces it). A stage is a folder of the package, or one top-level module
(`api`). The top-level `__init__.py` and this declaration belong to no stage.
"""

from __future__ import annotations

STAGES: tuple[tuple[str, str], ...] = (
    ("platforms", "what differs between accelerator platforms (NVIDIA, AMD, TPU): one registry, standard library only"),
    ("core", "the shared vocabulary: errors and exit codes, dtypes, bounded YAML, checked names and outputs, versions"),
    ("worker", "what runs inside the compile worker, in any JAX environment (JAX and the standard library only)"),
    ("targets", "what a case is compiled for: GPU target specs (with their data), profiles, modes"),
    ("models", "the model code that cases compile (decoder, flax, MaxText, sharded layers); imports nothing here"),
    ("cases", "case files: the case model, its kinds, loading and validating YAML, users' modules"),
    ("compile", "render a case, compile it in a worker, cache and share compilations, export users' callables"),
    ("signature", "reduce optimized HLO to a typed fusion signature: gemms, collectives, attribution, coverage"),
    ("cost", "price a signature: the roofline cost model, its rates and its deltas"),
    ("verdict", "judge a signature: goldens, contracts, verdict rules, the canary, outcome codes"),
    ("versions", "released JAX versions and one environment per version, and the XLA commit each carries"),
    ("run", "the one runner: what a command runs on, plan -> compile -> judge, the results file"),
    ("matrix", "the case library across JAX versions: the matrix document, its views, news and version-ranged goldens"),
    ("upstream", "from a regression to an upstream bug: bisect, the first diverging pass, repro, reduce"),
    ("report", "outputs for people: terminal lines, the HTML report, issue bodies, GitHub CI output"),
    ("gpu", "checks on a real GPU: numerics, fidelity, calibration, target capture, the GPU session"),
    ("api", "check your own model from Python (`fp8_check.api`)"),
    ("cli", "the command line and the pytest plugin: commands register here, nothing imports them"),
)

NAMES: tuple[str, ...] = tuple(name for name, _ in STAGES)
