"""Canary audits, one module per design.

Canaries with random inclusion in one training run (``canary``: the ``canary`` and ``canary-final`` audits), repeated
runs with one canary each (``multi_run``), the crafted black-box audit from an auditor-chosen initial model
(``crafted``; its θ_0 and canary, ``crafted_init``; its runs as training jobs, ``crafted_runs``), the release audits
(``local``, ``dpmix``), weight noise where it is published (``weight_noise``), and the audit of any Opacus training loop
(``opacus``). Their scores are analysed by ``attacks.analysis``; the conformance of the run they observed by
``attacks.conformance``.
"""
