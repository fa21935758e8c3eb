"""The Reproduction section and its table (``table``)."""
