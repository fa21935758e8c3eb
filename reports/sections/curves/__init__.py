"""The Training curves section and its numbers (``table``: rows, CSV and figure)."""
