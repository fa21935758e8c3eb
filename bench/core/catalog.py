"""The registries of models and datasets, by name.

Light (no torch), so that listing and validating names is instant; each entry is imported on first use. One line
registers a model or a dataset loader.
"""

from __future__ import annotations

from bench.core.registry import Registry

MODELS: Registry = Registry("model")
"""Model factories ``(input_shape (C, H, W), num_classes, **kwargs) -> nn.Module`` (``bench.core.models``,
``bench.core.resnets``, ``bench.core.scatternet``)."""
MODELS.add_lazy("cnn-small", "bench.core.models:cnn_small")
MODELS.add_lazy("cnn-dpmix", "bench.core.models:cnn_dpmix")
MODELS.add_lazy("resnet18-gn", "bench.core.resnets:resnet18_gn")
MODELS.add_lazy("wrn-16-4", "bench.core.resnets:wrn_16_4")
MODELS.add_lazy("mlp", "bench.core.models:mlp")
MODELS.add_lazy("linear", "bench.core.models:linear")
MODELS.add_lazy("scatternet-linear", "bench.core.scatternet:scatternet_linear")
MODELS.add_lazy("autoencoder", "bench.core.models:autoencoder")

DATASETS: Registry = Registry("dataset")
"""Dataset loaders ``(root, download) -> (training pool, test set)`` (``bench.core.data``, ``bench.core.cifar``)."""
DATASETS.add_lazy("mnist", "bench.core.data:load_mnist")
DATASETS.add_lazy("fashion-mnist", "bench.core.data:load_fashion_mnist")
DATASETS.add_lazy("digits", "bench.core.data:load_digits")
DATASETS.add_lazy("cifar10", "bench.core.cifar:load_cifar10")
