"""Performance: each benchmark against a baseline run in the same process (docs/benchmarks.md)."""
