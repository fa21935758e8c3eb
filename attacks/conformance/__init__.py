"""Conformance of a mechanism's audit run to the mechanism its ε certifies.

One module per mechanism (``dpsgd``, ``opacus``, ``local``, ``dpmix``): every parameter the accountant assumes, measured
on the run the audit made through the mechanism's own code, tested against the certified value, and the ε the measured
parameters imply by an accountant that shares no code with the mechanism's (the statistics in ``attacks.analysis``).
"""
