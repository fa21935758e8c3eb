"""The zoo's auditors, one module each (``bench.zoo.api.Auditor``, registered at import).

Privbench's own audits and conformance tests, and the anchors' own code where its package is installed.
"""
