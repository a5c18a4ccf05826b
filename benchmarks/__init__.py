"""Benchmarks by purpose: ``perf/`` (performance against a baseline run in the same process),
``studies/`` (quality studies) and ``spaces/`` (the embedding spaces the studies read).

One entry, ``python -m benchmarks`` (``--help`` lists every benchmark): the default set with
``--quick`` for small sizes and ``--json PATH`` to keep the results for comparison across
commits, or ``python -m benchmarks NAME [ARGS ...]`` for one benchmark and its own arguments.
"""
