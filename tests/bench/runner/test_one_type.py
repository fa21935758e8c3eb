"""One privacy type and one audit-design type from the mechanism or attack to results.json (issue 32, item 1): the
results forms are the foundation's types (plus ``weak_delta``), so nothing is copied field by field on the way."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from attacks.analysis import audit_bounds
from attacks.base.outputs import MembershipScores
from bench.core.design import AuditDesign
from bench.core.privacy import PrivacySpent, RelationEpsilon
from bench.results import AttackRecord, PrivacyRecord
from bench.runner.cells import membership_record, privacy_record

DELTA = 1e-5


def _dpsgd_like() -> PrivacySpent:
    return PrivacySpent(1.0, DELTA, "dp_accounting-pld", "central-dp", relation="replace-one",
                        profile=((1.0, DELTA), (0.5, 1e-3)),
                        other_relations=(RelationEpsilon("add-remove", 0.49, "opacus-prv", ((0.49, DELTA),)),))


def test_the_results_record_is_the_spent_privacy_plus_weak_delta():
    spent = _dpsgd_like()
    stored = privacy_record(spent, weak_delta=True)
    assert isinstance(stored, PrivacySpent) and stored.weak_delta
    assert stored.model_dump(exclude={"weak_delta"}) == spent.model_dump()
    assert PrivacyRecord.model_validate_json(stored.model_dump_json()) == stored  # through JSON and back
    # under(): one definition for both; the results-only field rides along
    add_remove = stored.under("add-remove")
    assert isinstance(add_remove, PrivacyRecord) and add_remove.weak_delta
    assert (add_remove.epsilon, add_remove.accountant, add_remove.profile) == (0.49, "opacus-prv", ((0.49, DELTA),))
    assert spent.under("add-remove").model_dump() == add_remove.model_dump(exclude={"weak_delta"})
    assert spent.under("replace-one-same-class") is None and PrivacySpent.no_guarantee().under("add-remove") is None


def test_the_one_types_are_frozen_and_validate_on_construction():
    spent = _dpsgd_like()
    with pytest.raises(ValidationError):
        spent.epsilon = 2.0
    with pytest.raises(ValueError, match="neighbouring relation"):
        PrivacyRecord(epsilon=1.0, delta=DELTA, accountant="pld", guarantee="central-dp")  # read from results.json too
    with pytest.raises(ValueError, match="relation 'add/remove' not in"):
        RelationEpsilon("add/remove", 1.0, "pld")
    with pytest.raises(TypeError, match="both by position and by keyword"):
        PrivacySpent(1.0, DELTA, "pld", "central-dp", epsilon=2.0, relation="add-remove")
    with pytest.raises(ValueError, match="threat model"):
        AuditDesign("one-run", "grey-box")
    assert AuditDesign("one-run", "white-box", 10) == AuditDesign(kind="one-run", threat_model="white-box", size=10)


def test_the_attacks_design_object_is_what_results_json_stores():
    rng = np.random.default_rng(0)
    labels = np.repeat([1, 0], 200)
    design = AuditDesign("multi-run", "black-box", size=400, relation="replace-one", gaussian=True,
                         channels=("image",))
    res = MembershipScores(rng.normal(size=400) + labels, labels, design=design)
    record = membership_record("toy", res, privacy=_dpsgd_like(), delta=DELTA)
    assert record.audit.design is design  # no copy on the way
    assert AttackRecord.model_validate_json(record.model_dump_json()).audit.design == design
    # a design without a size gets the number of scored records, nothing else changed
    sized = membership_record("toy", MembershipScores(res.scores, labels, design=design.model_copy(
        update={"size": 0})), privacy=_dpsgd_like(), delta=DELTA).audit.design
    assert sized == design
    # the stored audit's valid bounds recompute from the typed record, at its own level the stored values
    audit = record.audit
    again = audit_bounds(audit, confidence=audit.method_confidence)
    assert again and again == pytest.approx({b.method: b.epsilon_lb for b in audit.bounds if b.valid}, rel=1e-9)
