"""Local DP by input perturbation: the ``local-gaussian`` mechanism (``mechanism``) and its unsupervised learner,
Invariant Information Clustering (``iic``). Its accounting: ``mechanisms.accounting.gaussian``."""
