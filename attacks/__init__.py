"""Membership and reconstruction attacks, registered by their standard names (one line each, imported
on first use, so ``attacks.metrics`` stays importable without torch)."""

from bench.core.registry import Registry

ATTACKS: Registry = Registry("attack", base="attacks.base:Attack")
ATTACKS.add_lazy("loss", "attacks.membership:LossAttack")
ATTACKS.add_lazy("confidence", "attacks.membership:ConfidenceAttack")
ATTACKS.add_lazy("entropy", "attacks.membership:EntropyAttack")
ATTACKS.add_lazy("shadow", "attacks.shokri:ShadowModelAttack")
ATTACKS.add_lazy("lira", "attacks.lira:LiRA")
ATTACKS.add_lazy("lira-offline", "attacks.lira:LiRAOffline")
ATTACKS.add_lazy("rmia", "attacks.rmia:RMIA")
ATTACKS.add_lazy("canary", "attacks.canary:CanaryAudit")
ATTACKS.add_lazy("canary-final", "attacks.canary:FinalModelCanaryAudit")
ATTACKS.add_lazy("local-canary", "attacks.release_canaries:LocalCanaryAudit")
ATTACKS.add_lazy("dpmix-canary", "attacks.dpmix_canary:DPMixCanaryAudit")
ATTACKS.add_lazy("weight-canary", "attacks.weight_canary:WeightCanaryAudit")
ATTACKS.add_lazy("opacus-canary", "attacks.opacus_audit:OpacusCanaryAudit")
ATTACKS.add_lazy("opacus-canary-final", "attacks.opacus_final:OpacusFinalCanaryAudit")
ATTACKS.add_lazy("multi-run", "attacks.multi_run:MultiRunAudit")
ATTACKS.add_lazy("multi-run-crafted", "attacks.crafted:CraftedAudit")

ATTACKS.add_lazy("miface", "attacks.inversion:MIFace")
ATTACKS.add_lazy("dpmix-mia-corr", "attacks.release_dpmix:DPMixCorrelation")
ATTACKS.add_lazy("dpmix-mia-lr", "attacks.release_dpmix:DPMixLikelihoodRatio")
ATTACKS.add_lazy("dpmix-reconstruct", "attacks.release_dpmix:DPMixReconstruction")
ATTACKS.add_lazy("local-linkage", "attacks.release_local:LocalLinkage")
ATTACKS.add_lazy("local-reconstruct", "attacks.release_local:LocalReconstruction")

__all__ = ["ATTACKS"]
