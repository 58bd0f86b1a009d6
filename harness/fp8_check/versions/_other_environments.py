"""Compile workers in other environments: a target whose platform's plugin this environment lacks
(mi300x: ROCm, absent from the main `.venv`) compiles in that platform's cached per-version environment
(`fp8_check.versions._envs.python_for`), on a compiler of its own, started on first use."""

from __future__ import annotations

from fp8_check import platforms


class OtherEnvironments:
    def __init__(self, mode: str, timeout: float):
        self.mode, self.timeout = mode, timeout
        self._compilers: dict[str, object] = {}

    def compiler_for(self, target, default, error: type[Exception] = RuntimeError):
        """`default` when this environment compiles for `target`, else the other environment's compiler;
        `error` (its message naming the platform) when that environment cannot be built."""
        from fp8_check.compile import Compiler  # start-up: see tests/house/test_imports.py
        from fp8_check.versions import _envs

        if self.mode != "deviceless" or target.platform is platforms.DEFAULT:
            return default
        try:
            python = _envs.python_for([target])
        except _envs.InstallError as exc:
            raise error(f"cannot build the {target.platform.vendor} environment: {exc}") from None
        if python is None:
            return default
        if python not in self._compilers:
            self._compilers[python] = Compiler(self.mode, python=python, timeout=self.timeout)
        return self._compilers[python]

    def close(self) -> None:
        for compiler in self._compilers.values():
            compiler.close()  # type: ignore[attr-defined]
        self._compilers.clear()
