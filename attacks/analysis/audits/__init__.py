"""Pieces of single audits that are pure maths, beside the statistics they read (``attacks.analysis.statistics``).

``crafted``: the crafted black-box audit's scores and what it records beside its bounds (``attacks.canaries.crafted``);
``guess_plan``: the white-box one-run audit's guessing rule, fixed before the run; ``pooled``: the white-box DP-SGD
canary audits pooled across a run's seeds. Pure NumPy / SciPy (no torch).
"""
