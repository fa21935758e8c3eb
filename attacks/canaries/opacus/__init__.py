"""The white-box and final-model audits of any plug-in whose training goes through Opacus' ``DPOptimizer``.

The user's code unchanged: the audits (``audit``: ``opacus-canary``; ``final``: ``opacus-canary-final``), the observer
that patches Opacus for the length of a ``fit`` (``observer``) and its pieces that patch nothing (``phases``).
"""
