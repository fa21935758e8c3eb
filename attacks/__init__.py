"""Membership and reconstruction attacks, registered by their standard names.

One line each, imported on first use, so ``attacks.analysis.statistics.metrics`` stays importable without torch.
"""

from bench.core.registry import Registry

ATTACKS: Registry = Registry("attack", base="attacks.base.attack:Attack")
ATTACKS.add_lazy("loss", "attacks.membership.threshold:LossAttack")
ATTACKS.add_lazy("confidence", "attacks.membership.threshold:ConfidenceAttack")
ATTACKS.add_lazy("entropy", "attacks.membership.threshold:EntropyAttack")
ATTACKS.add_lazy("shadow", "attacks.membership.shokri:ShadowModelAttack")
ATTACKS.add_lazy("lira", "attacks.membership.lira:LiRA")
ATTACKS.add_lazy("lira-offline", "attacks.membership.lira:LiRAOffline")
ATTACKS.add_lazy("rmia", "attacks.membership.rmia:RMIA")
ATTACKS.add_lazy("canary", "attacks.canaries.canary:CanaryAudit")
ATTACKS.add_lazy("canary-final", "attacks.canaries.canary:FinalModelCanaryAudit")
ATTACKS.add_lazy("local-canary", "attacks.canaries.local:LocalCanaryAudit")
ATTACKS.add_lazy("dpmix-canary", "attacks.canaries.dpmix:DPMixCanaryAudit")
ATTACKS.add_lazy("weight-canary", "attacks.canaries.weight_noise:WeightCanaryAudit")
ATTACKS.add_lazy("opacus-canary", "attacks.canaries.opacus.audit:OpacusCanaryAudit")
ATTACKS.add_lazy("opacus-canary-final", "attacks.canaries.opacus.final:OpacusFinalCanaryAudit")
ATTACKS.add_lazy("multi-run", "attacks.canaries.multi_run:MultiRunAudit")
ATTACKS.add_lazy("multi-run-crafted", "attacks.canaries.crafted:CraftedAudit")

ATTACKS.add_lazy("miface", "attacks.reconstruction.inversion:MIFace")
ATTACKS.add_lazy("dpmix-mia-corr", "attacks.membership.release_dpmix:DPMixCorrelation")
ATTACKS.add_lazy("dpmix-mia-lr", "attacks.membership.release_dpmix:DPMixLikelihoodRatio")
ATTACKS.add_lazy("dpmix-reconstruct", "attacks.reconstruction.release_dpmix:DPMixReconstruction")
ATTACKS.add_lazy("local-linkage", "attacks.reconstruction.release_local:LocalLinkage")
ATTACKS.add_lazy("local-reconstruct", "attacks.reconstruction.release_local:LocalReconstruction")

__all__ = ["ATTACKS"]
