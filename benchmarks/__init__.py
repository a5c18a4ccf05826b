"""Performance comparisons, each against a baseline run in the same process.

Run all with ``python -m benchmarks`` (``--quick`` for small sizes, ``--json PATH`` to
keep the results for comparison across commits).
"""
