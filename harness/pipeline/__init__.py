"""The per-case pipeline, one stage per module, in order:

cases (YAML -> Case) -> render (Case -> Rendered source) -> compile/worker/aot
(source x Target x Profile -> Compilation) -> hlo/signature (optimized HLO ->
Signature) -> golden (Golden expectations) -> runner (judge: Signature x Golden
-> Outcome) -> results (Outcomes -> terminal lines and the results JSON).

Kept free of imports: the compile worker imports `fp8_check.pipeline.aot` inside the
per-version environments, which hold only JAX.
"""
