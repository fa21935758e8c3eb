"""The Reconstruction section and its table (``table``)."""
