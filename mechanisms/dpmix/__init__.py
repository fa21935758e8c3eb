"""DPMix (Lee, Kim, Lee, Suh, ISIT 2019).

The random-mixing release (``mechanism``), its per-class variant (``per_class``) and the mixing kernels both use
(``mixing``). Its accountants: ``mechanisms.accounting.dpmix``.
"""
