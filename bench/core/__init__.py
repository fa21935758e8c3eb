"""The foundation: data, models, training, core types, parameters, registries, errors and atomic I/O.

Everything in privbench may import from here; nothing here imports ``mechanisms``, ``attacks``, ``bench.runner``,
``bench.cli`` or ``reports`` (enforced by import-linter, ``pyproject.toml``). Importing this package is light.
"""
