"""Membership and reconstruction attacks, registered by their standard names (one line each, imported
on first use, so ``attacks.metrics`` stays importable without torch)."""

from bench.registry import Registry

ATTACKS: Registry = Registry("attack")
ATTACKS.add_lazy("loss", "attacks.membership:LossAttack")

__all__ = ["ATTACKS"]
