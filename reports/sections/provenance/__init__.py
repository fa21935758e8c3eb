"""The Provenance section and its table (``table``)."""
