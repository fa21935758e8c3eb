"""The conformance tests' own accountants, written from the papers and sharing no code with ``mechanisms.accounting``.

A bug in a mechanism's accountant cannot move the reference its conformance tests hold it to. Pure NumPy / SciPy (and
``dp_accounting``'s PLD accountant); no torch.
"""
