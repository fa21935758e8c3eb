"""Canary audits, one module per design: canaries with random inclusion in one training run (``one_run``), repeated
runs with one canary each (``multi_run``), the crafted black-box audit from an auditor-chosen initial model
(``crafted``, ``crafted_init``), the release audits (``local``, ``dpmix``), weight noise where it is published
(``weight_noise``), and the audit of any Opacus training loop (``opacus``). Their scores are analysed by
``attacks.analysis``; the conformance of the run they observed by ``attacks.conformance``."""
