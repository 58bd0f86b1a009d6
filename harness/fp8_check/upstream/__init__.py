"""From a regression to a ready upstream bug: XLA commit ranges, the first diverging pass,
minimal repros, case reduction and XLA-style FileCheck tests (issue #12).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._bisect import BY_REFERENCE, CRITERIA, NO_COMPILE, Tester, Verdict, commit_ranges, search
    from ._explain import investigate, save
    from ._issue import UpstreamParts, parts_for, what_changed
    from ._reduce import RegressionError, reduce, to_yaml
else:
    __getattr__, __dir__, __all__ = attach(__name__)
