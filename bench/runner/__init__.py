"""The runner: configuration, the harness (one loop for ``run``, ``all`` and ``reproduce``), executors, the
model cache, presets and ``bench perf``. Imports the foundation, mechanisms and attacks; never the CLI."""
