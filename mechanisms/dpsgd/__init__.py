"""DP-SGD (Abadi et al. 2016) and its parts.

The registered mechanism (``mechanism``), its calibration and certified ε (``privacy``), the fast Opacus-exact step
(``fast``), per-sample clipping (``clipping``, book-keeping's per-layer rules in ``bk_layers``), augmentation
multiplicity (``augmult``) and the white-box gradient canaries the training step carries for the audits (``canaries``;
their request and placement: ``canary_placement``). Its accounting: ``mechanisms.accounting.gaussian`` and
``mechanisms.accounting.opacus_accountants``.
"""
