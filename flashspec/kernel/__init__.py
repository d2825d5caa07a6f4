"""flashspec's C kernel for CPU decoding: `build` (the sources in `csrc/`, compiled once per machine),
`formats` (exact int8 and int4 copies of weights), `products` (a few rows times a weight) and `layers`
(a whole decoder layer, and the feature drafter's step, in one call)."""
