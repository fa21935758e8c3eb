"""The attack plug-in surface, in three modules.

``attacks.base.attack`` (the base classes a new attack subclasses), ``attacks.base.context`` (what an attack may use on
one target) and ``attacks.base.outputs`` (what attacks produce). Plug-ins may import every name from here (``from
attacks.base import MembershipAttack``); the repository's own code imports each from the module that defines it.
"""

from attacks.base.attack import Attack, MembershipAttack, ReconstructionAttack, at_most
from attacks.base.context import AttackContext, AuditRequest, OneAtATime, TargetNotTrained, TrainLikeTarget
from attacks.base.outputs import MembershipScores, Reconstruction
from bench.core.design import AuditDesign  # attacks build their design from here

__all__ = ["Attack", "AttackContext", "AuditDesign", "AuditRequest", "MembershipAttack", "MembershipScores",
           "OneAtATime", "Reconstruction", "ReconstructionAttack", "TargetNotTrained", "TrainLikeTarget", "at_most"]
