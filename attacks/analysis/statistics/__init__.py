"""The statistics every audit reads: confidence limits, ROC metrics, ε lower bounds and estimates, the ideal limits.

One module per statistic or analysis (``attacks.analysis.METHODS`` names each analysis and its assumption):
``confidence`` (Clopper-Pearson, χ² limits), ``metrics`` (the ROC), ``thresholds`` (Jagielski et al. 2020), ``one_run``
(Steinke et al. 2023), ``fdp`` (Mahloujifar et al. 2024), ``curve`` (a certified trade-off curve tested), ``gaussian``,
``gaussian_llr`` (with ``gaussian_llr_ideal``), ``channels`` and ``anchor`` (estimates), ``limits`` (what the ideal
mechanism reaches). Pure NumPy / SciPy (no torch).
"""
