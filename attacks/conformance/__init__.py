"""Conformance of a mechanism's audit run to the mechanism its ε certifies.

Three kinds, one place each: one module per mechanism (``dpsgd``, ``opacus``, ``local``, ``dpmix``) measures every
parameter the accountant assumes on the run the audit made through the mechanism's own code; ``hypothesis_tests``
holds the tests of H0 "this run is the certified mechanism" they call (pure); ``accountants`` the conformance code's
own accountants, sharing no code with the mechanism's (pure).
"""
