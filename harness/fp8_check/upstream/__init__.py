"""From a regression to a ready upstream bug: XLA commit ranges, the first diverging pass,
minimal repros, case reduction and XLA-style FileCheck tests (issue #12)."""
