"""The runner: the harness (one loop for ``run``, ``all`` and ``reproduce``), the plan of cells.

The checks around a trained model (degenerate models, the non-private ceiling, splits that cannot drift) and the output
folder. The configuration is ``bench.config``, training and the model cache ``bench.execution``; ``bench reproduce`` and
``bench perf`` are ``bench.reproduce`` and ``bench.perf``. Imports the foundation, mechanisms and attacks; never the
CLI.

What to train, from the plan to a worker (each fact written once):

- ``TrainSpec`` (``bench.core.types``): a mechanism's validated hyper-parameters; public to plug-ins (``fit`` takes it).
- ``Recipe`` (``bench.execution.trainjob``): what to train — mechanism, ``TrainSpec``, target ε, δ, dataset; every
  model of a cell.
- ``PlannedCell`` (``cells``): one cell of a plan — a ``Recipe`` for one seed, its split, its attacks, its preset row.
- ``TrainJob`` (``bench.execution.trainjob``): what is shipped to a worker — a ``Recipe``'s models on their data and
  seeds, the device, an audit request, a probe set.
"""
