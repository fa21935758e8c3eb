"""Privacy mechanisms, registered by their standard names (one line each, imported on first use)."""

from bench.core.registry import Registry

MECHANISMS: Registry = Registry("mechanism", base="mechanisms.base:Mechanism")
MECHANISMS.add_lazy("baseline", "mechanisms.baseline:Baseline")
MECHANISMS.add_lazy("dpsgd", "mechanisms.dpsgd.mechanism:DPSGD")
MECHANISMS.add_lazy("dpmix", "mechanisms.dpmix.mechanism:DPMix")
MECHANISMS.add_lazy("dpmix-per-class", "mechanisms.dpmix.per_class:DPMixPerClass")
MECHANISMS.add_lazy("local-gaussian", "mechanisms.local.mechanism:LocalGaussian")
MECHANISMS.add_lazy("weight-noise", "mechanisms.weight_noise:WeightNoise")

__all__ = ["MECHANISMS"]
