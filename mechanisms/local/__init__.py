"""Local DP by input perturbation.

The ``local-gaussian`` mechanism (``mechanism``) and its learners on the release: the closed-form nearest class mean
(``class_means``) and Invariant Information Clustering (``iic``). Its accounting: ``mechanisms.accounting.gaussian``.
"""
