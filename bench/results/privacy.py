"""A model's privacy in results.json.

``bench.core.privacy.PrivacySpent`` (the accountant's ε with its δ and neighbouring relation, and the same guarantee
under other relations), plus the results-only ``weak_delta``.
"""

from __future__ import annotations

from bench.core.privacy import PrivacySpent, RelationEpsilon

__all__ = ["PrivacyRecord", "RelationEpsilon"]  # RelationEpsilon: one of other_relations, stored as it is


class PrivacyRecord(PrivacySpent):
    """What a model's mechanism spent, as certified by a named accountant (``bench.core.privacy.PrivacySpent``).

    ``epsilon``, ``delta`` and ``relation`` are null without a formal guarantee (``guarantee: "none"``; ``off``: ε = ∞);
    ``claimed_epsilon`` is a source's claim shown beside, never instead; ``weak_delta``: δ >= 1 / n_members.
    """

    weak_delta: bool = False
    """True when δ >= 1 / n_members (releasing one record outright satisfies such a δ)."""
