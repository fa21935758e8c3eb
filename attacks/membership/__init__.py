"""Membership inference on a trained model or on a data release.

Threshold attacks on one statistic of the target's output (``threshold``: LOSS, confidence, modified entropy), the
attacks that calibrate against shadow / reference models (``shadows``, ``shokri``, ``lira``, ``rmia``), and the
attacks on a DPMix release, which need no model (``release_dpmix``). Heuristic attacks: their scores give membership
advantage and TPR at FPR; an ε lower bound from them is only as valid as the design that chose the members
(``attacks.analysis``).
"""
