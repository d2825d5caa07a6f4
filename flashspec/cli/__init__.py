"""The `flashspec` command line: `main` (parser, `generate`, `demo`), `options` (the target, draft and
tree options every decoding command shares), `bench` and `distill` (their commands)."""
