"""On a real GPU: numerics against a float64 reference, target spec capture, and the
fidelity of deviceless signatures against device compiles."""
