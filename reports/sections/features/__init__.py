"""The What the convolutions see section and its maths (``feature_maps``)."""
