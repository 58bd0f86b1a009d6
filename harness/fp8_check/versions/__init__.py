"""Across JAX versions: released versions (releases), per-version environments (envs),
the case x version matrix (matrix) and bisection to the first bad version (bisect).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._envs import Env, InstallError, Manager, other_platform, python_for
    from ._other_environments import OtherEnvironments
    from ._requirement_envs import RequirementEnvironments, SetEnvironments, adding, ensure_sets, service_for, sets_of, wrap
    from ._requirements import RequirementOptions, add_with_options, extras_of
    from ._shared_xla import Recorder, Replay, twins
    from ._uvbin import find_uv
    from ._wheels import kind_for_mode
    from .releases import (
        SELECTIONS,
        VersionError,
        available,
        between,
        format_list,
        jax_index,
        newest_on_index,
        parse_version,
        select_range,
        sort_versions,
    )
    from .xla_commits import XlaRange, jax_range, tabled_releases, xla_range
else:
    __getattr__, __dir__, __all__ = attach(__name__)
