"""``python -m bench perf``: the throughput of the hot paths as same-run ratios (``run``).

The paths measured (``paths``), how they are timed (``timing``), and what is measured and checked without importing
torch (``config``).
"""
