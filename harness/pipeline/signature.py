"""Stage 4: reduce optimized HLO to a normalized fusion `Signature`.

The signature ignores names, instruction ids, metadata, fingerprints, workspace
sizes, `selected_algorithm` and schedule order; it changes when the fusion
changes: which kernels ENTRY launches, every gemm (cuBLAS custom-call or Triton
gemm fusion) with its operand roles and dtypes, result, epilogue and amax, and
which pattern ops stayed outside the gemms as separate kernels.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from harness.pipeline import hlo

# Ops that launch no kernel of their own.
_NO_KERNEL = {
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all",
    "partition-id", "replica-id", "add-dependency", "opt-barrier", "domain",
}
# Wrappers whose called computations hold the real kernels (command buffers, async).
_WRAPPERS = {"call", "async-start", "async-update", "async-done", "while", "conditional"}
# The ops of an FP8 matmul pattern worth naming when they stay outside a gemm.
PATTERN_OPS = {
    "convert", "multiply", "divide", "clamp", "maximum", "minimum", "abs", "reduce",
    "add", "tanh", "erf", "exponential", "transpose", "copy", "dot", "scaled-dot",
}
_DOT_OPS = {"dot", "scaled-dot"}
FP8_TYPES = {"f8e4m3fn", "f8e5m2", "f8e4m3", "f8e4m3fnuz", "f8e5m2fnuz", "f8e3m4", "f8e8m0fnu"}


@dataclass
class Gemm:
    target: str  # custom-call target or Triton fusion backend kind
    operand_dtypes: list[str]  # dtypes the matmul itself runs on (a, b)
    operands: dict[str, str] = field(default_factory=dict)  # role -> dtype (a, b, c, bias, *_scale)
    output: str = ""
    amax: bool = False
    epilogue: str | None = None
    damax_output: bool | None = None
    alpha_real: float | None = None
    beta: float | None = None
    dims: dict[str, list[int]] = field(default_factory=dict)
    fused_ops: list[str] = field(default_factory=list)  # pattern ops inside a gemm fusion
    inputs: list[str] = field(default_factory=list)  # dtypes of a gemm fusion's array inputs (what it loads)

    @property
    def fp8(self) -> bool:
        return len(self.operand_dtypes) == 2 and all(d in FP8_TYPES for d in self.operand_dtypes)


@dataclass
class Signature:
    kernels: int
    launches: list[str]
    gemms: list[Gemm]
    unfused: list[str]  # pattern ops left in non-gemm kernels

    def to_dict(self) -> dict:
        d = asdict(self)
        for g in d["gemms"]:
            for key in [k for k, v in g.items() if v is None or v == [] or v == {}]:
                del g[key]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Signature":
        gemms = [Gemm(**g) for g in d.get("gemms", [])]
        return cls(d["kernels"], list(d.get("launches", [])), gemms, list(d.get("unfused", [])))

    @property
    def fp8_gemms(self) -> int:
        return sum(g.fp8 for g in self.gemms)


def extract(text: str) -> Signature:
    module = hlo.parse(text)
    kernels: list[tuple[hlo.Instruction, hlo.Computation]] = []
    _collect_kernels(module, module.entry, kernels, depth=0)
    gemms: list[Gemm] = []
    launches: list[str] = []
    unfused: set[str] = set()
    for instr, comp in kernels:
        gemm = _gemm(module, instr, comp)
        if gemm is not None:
            gemms.append(gemm)
            launches.append(f"gemm {gemm.target}")
            continue
        ops = sorted(_ops_inside(module, instr))
        unfused.update(ops)
        if instr.opcode == "fusion":
            kind = instr.fusion_kind or "?"
            backend = _fusion_backend_kind(instr)
            label = f"fusion {kind}" + (f" {backend}" if backend else "")
        elif instr.opcode == "custom-call":
            label = f"custom-call {instr.custom_call_target}"
        else:
            label = instr.opcode
        launches.append(label + (f" [{', '.join(ops)}]" if ops else ""))
    gemms.sort(key=lambda g: (g.target, g.operand_dtypes, g.output, str(g.dims)))
    return Signature(len(kernels), sorted(launches), gemms, sorted(unfused))


def _collect_kernels(module: hlo.Module, comp: hlo.Computation, out: list, depth: int) -> None:
    for instr in comp.instructions:
        if instr.opcode in _NO_KERNEL:
            continue
        if instr.opcode in _WRAPPERS and depth < 8:
            for name in instr.called:
                callee = module.computations.get(name)
                if callee is not None:
                    _collect_kernels(module, callee, out, depth + 1)
            continue
        out.append((instr, comp))


def _fusion_backend_kind(instr: hlo.Instruction) -> str | None:
    bc = instr.backend_config
    # Older XLA (quoted-string backend_config) printed FusionBackendConfig unwrapped.
    cfg = bc.get("fusion_backend_config") or (bc if "kind" in bc else {})
    kind = cfg.get("kind")
    return kind or None


def _inner_instructions(module: hlo.Module, instr: hlo.Instruction, depth: int = 0):
    """Every instruction in the computations `instr` calls, recursively (nested fusions too)."""
    for name in instr.called:
        callee = module.computations.get(name)
        if callee is None:
            continue
        for inner in callee.instructions:
            yield inner, callee
            if inner.called and depth < 8:
                yield from _inner_instructions(module, inner, depth + 1)


def _ops_inside(module: hlo.Module, instr: hlo.Instruction) -> set[str]:
    if instr.opcode != "fusion":
        return {instr.opcode} & PATTERN_OPS
    return {inner.opcode for inner, _ in _inner_instructions(module, instr)} & PATTERN_OPS


def _type_of(module: hlo.Module, comp: hlo.Computation, name: str, index: int | None = None) -> str:
    instr = comp.by_name().get(name) or module.instruction(name)
    if instr is None:
        return "?"
    if index is not None and instr.type.lstrip().startswith("("):
        elements = instr.result_types
        return elements[index] if index < len(elements) else "?"
    return instr.type


def _operand_types(module: hlo.Module, comp: hlo.Computation, instr: hlo.Instruction) -> list[tuple[str, str]]:
    """(name, type) of each operand, resolving the `%x#i` tuple shorthand to element i's type."""
    idx = instr.operand_tuple_index or [None] * len(instr.operands)
    return [(n, _type_of(module, comp, n, i)) for n, i in zip(instr.operands, idx)]


def _is_constant_one(module: hlo.Module, comp: hlo.Computation, name: str) -> bool:
    instr = comp.by_name().get(name) or module.instruction(name)
    if instr is None:
        return False
    if instr.opcode == "constant":
        try:
            return float(instr.operand_text.strip()) == 1.0
        except ValueError:
            return False
    if instr.opcode == "fusion":  # a constant wrapped into its own fusion
        inner = [i for i, _ in _inner_instructions(module, instr) if i.opcode != "parameter"]
        if len(inner) == 1 and inner[0].opcode == "constant":
            try:
                return float(inner[0].operand_text.strip()) == 1.0
            except ValueError:
                return False
    return False


def _gemm(module: hlo.Module, instr: hlo.Instruction, comp: hlo.Computation) -> Gemm | None:
    if instr.opcode == "custom-call":
        target = instr.custom_call_target or ""
        if "gemm" in target or "matmul" in target:
            return _cublas_gemm(module, instr, comp, target)
        return None
    if instr.opcode == "fusion":
        dots = [(i, c) for i, c in _inner_instructions(module, instr) if i.opcode in _DOT_OPS]
        if dots:
            return _fusion_gemm(module, instr, dots[0])
    if instr.opcode in _DOT_OPS:
        return _fusion_gemm(module, instr, (instr, comp), target=instr.opcode)
    return None


def _cublas_gemm(module: hlo.Module, instr: hlo.Instruction, comp: hlo.Computation, target: str) -> Gemm:
    bc = instr.backend_config
    # Older XLA (quoted-string backend_config) printed GemmBackendConfig unwrapped.
    cfg = bc.get("gemm_backend_config") or (bc if "dot_dimension_numbers" in bc else {})
    beta = float(cfg.get("beta", 0) or 0)
    types = _operand_types(module, comp, instr)
    operands: dict[str, str] = {}
    rest = list(types)
    for role in ("a", "b"):
        if rest:
            operands[role] = hlo.dtype_of(rest.pop(0)[1])
    if beta != 0 and rest and hlo.rank_of(rest[0][1]) >= 2:
        operands["c"] = hlo.dtype_of(rest.pop(0)[1])
    scalars = [(n, t) for n, t in rest if hlo.rank_of(t) == 0]
    others = [(n, t) for n, t in rest if hlo.rank_of(t) != 0]
    scale_roles = {
        0: [], 1: ["a_scale"], 2: ["a_scale", "b_scale"], 3: ["a_scale", "b_scale", "d_scale"],
        4: ["a_scale", "b_scale", "c_scale", "d_scale"],
    }.get(len(scalars), [f"scale{i}" for i in range(len(scalars))])
    for role, (name, t) in zip(scale_roles, scalars):
        if not _is_constant_one(module, comp, name):  # a unit scale is no scale
            operands[role] = hlo.dtype_of(t)
    for i, (name, t) in enumerate(others):
        operands["bias" if i == 0 and hlo.rank_of(t) == 1 else f"aux{i}"] = hlo.dtype_of(t)
    results = [t for t in instr.result_types if hlo.dtype_of(t) not in ("s8", "u8")]  # drop workspace
    output = hlo.dtype_of(results[0]) if results else "?"
    amax = any(hlo.rank_of(t) == 0 and hlo.dtype_of(t) == "f32" for t in results[1:])
    dnums = cfg.get("dot_dimension_numbers") or {}
    return Gemm(
        target=target,
        operand_dtypes=[operands.get("a", "?"), operands.get("b", "?")],
        operands=operands,
        output=output,
        amax=amax,
        epilogue=cfg.get("epilogue", "DEFAULT"),
        damax_output=bool(cfg.get("damax_output", False)),
        alpha_real=float(cfg.get("alpha_real", 1) or 0),
        beta=beta,
        dims={
            key.replace("_dimensions", ""): [int(x) for x in dnums.get(key, [])]
            for key in ("lhs_contracting_dimensions", "rhs_contracting_dimensions", "lhs_batch_dimensions", "rhs_batch_dimensions")
        },
    )


def _dims_attr(dot: hlo.Instruction, key: str) -> list[int]:
    raw = dot.attr(key)
    if not raw:
        return []
    return [int(x) for x in raw.strip("{}").split(",") if x.strip()]


def _fusion_gemm(module, instr, dot_and_comp, target: str | None = None) -> Gemm:
    dot, dot_comp = dot_and_comp
    operand_dtypes = [hlo.dtype_of(t) for _, t in _operand_types(module, dot_comp, dot)[:2]]
    results = instr.result_types
    inside = {i.opcode for i, _ in _inner_instructions(module, instr)} if instr.opcode == "fusion" else set()
    return Gemm(
        target=target or _fusion_backend_kind(instr) or f"fusion {instr.fusion_kind}",
        operand_dtypes=operand_dtypes,
        output=hlo.dtype_of(results[0]),
        amax=any(hlo.rank_of(t) == 0 for t in results[1:]),
        dims={
            "lhs_contracting": _dims_attr(dot, "lhs_contracting_dims"),
            "rhs_contracting": _dims_attr(dot, "rhs_contracting_dims"),
            "lhs_batch": _dims_attr(dot, "lhs_batch_dims"),
            "rhs_batch": _dims_attr(dot, "rhs_batch_dims"),
        },
        fused_ops=sorted((inside & PATTERN_OPS) - _DOT_OPS),
        inputs=sorted(
            hlo.dtype_of(t) for _, t in _operand_types(module, module.entry, instr) if hlo.rank_of(t) > 0
        ) if instr.opcode == "fusion" else [],
    )
