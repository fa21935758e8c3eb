"""The runner: the harness (one loop for ``run``, ``all`` and ``reproduce``), the plan of cells.

The checks around a trained model (degenerate models, the non-private ceiling, splits that cannot drift) and the output
folder. The configuration is ``bench.config``, training and the model cache ``bench.execution``; ``bench reproduce`` and
``bench perf`` are ``bench.reproduce`` and ``bench.perf``. Imports the foundation, mechanisms and attacks; never the
CLI.

Design notes: docs/design-notes.md.
"""
