"""Local Gaussian noise with labels released in the clear: randomized response skipped while the accountant still
composes the image with a randomized-response label (the source's "labels public", without saying so)."""

import mechanisms.local.mechanism as local


def randomize_labels(y, *, epsilon, num_classes, generator):
    return y.clone()


local.randomize_labels = randomize_labels
