"""``python -m bench reproduce``.

The reference systems' presets (``presets``: their settings and published figures) rerun through the harness, and their
rows beside the published figures (``run``).
"""
