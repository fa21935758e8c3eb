"""The one contract between the runner and the reports: the typed ``results.json`` document.

The runner (``bench.runner``) builds these objects and writes them with ``write``; the reports read them with
``read`` and nothing else. One ``SCHEMA_VERSION``; a document of another version fails with one line.
``docs/results-schema.md`` is generated from these classes (``python -m bench.results``); a test keeps it in step.
No torch import. Units: ε unitless, δ a probability, accuracies and rates fractions in [0, 1], times in seconds,
throughput in samples/s.
"""

from bench.results.audit_summary import AuditSummary, DetectionRow, PooledAudit, PrivacyBug
from bench.results.base import REPRODUCED_WITHIN, SCHEMA_VERSION
from bench.results.ceiling import Candidate, Ceiling
from bench.results.conformance import Conformance, ConformanceTest, MeasuredEpsilon
from bench.results.document import (
    DatasetInfo,
    ReproducedValues,
    ReproductionCurve,
    ReproductionRow,
    Results,
    read,
    write,
)
from bench.results.membership import AttackRecord, Audit, Bound, Design, Metrics, OneRun, Roc, TprAtFpr
from bench.results.outcomes import TestOutcomes, pack_outcomes, test_set_hash, unpack_outcomes
from bench.results.privacy import PrivacyRecord, RelationEpsilon
from bench.results.runs import Degenerate, EpochRecord, FeatureMaps, Images, RunResult, Timings, Utility
from bench.results.schema_doc import schema_markdown
from bench.results.tuning import RecipeCandidate, RecipeChoice

__all__ = [
    "REPRODUCED_WITHIN", "SCHEMA_VERSION", "AttackRecord", "Audit", "AuditSummary", "Bound", "Candidate", "Ceiling",
    "Conformance", "ConformanceTest",
    "DatasetInfo", "Degenerate", "Design", "DetectionRow",
    "EpochRecord", "FeatureMaps",
    "Images", "MeasuredEpsilon", "Metrics", "OneRun", "PooledAudit", "PrivacyRecord", "PrivacyBug", "RelationEpsilon",
    "RecipeCandidate", "RecipeChoice", "ReproducedValues", "ReproductionCurve", "ReproductionRow",
    "Results", "Roc", "RunResult", "TestOutcomes", "Timings", "TprAtFpr", "Utility", "pack_outcomes", "read",
    "schema_markdown", "test_set_hash", "unpack_outcomes", "write",
]
