"""``docs/results-schema.md``, generated from the models (``python -m bench.results``)."""

from __future__ import annotations

import inspect
import json
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from bench.results.base import SCHEMA_VERSION
from bench.results.document import Results

SCHEMA_HEADER = f"""\
# results.json (schema_version {SCHEMA_VERSION})

<!-- Generated from bench/results/ by `python -m bench.results`; do not edit by hand
     (tests/bench/results/test_schema_doc.py checks that this file matches the code). -->

`results/<run-id>/results.json` is the one contract between the runner and the reports: the runner builds a
[`Results`](#results) and writes it with `bench.results.write`; the reports read it with `bench.results.read` and
nothing else, so every report can be redrawn without retraining (`python -m bench report RUN_DIR`).

- **Atomic writes.** The document is written to a temporary file in the same folder, flushed to disk, then renamed
  over `results.json` (`bench.core.io.atomic_write_text`), after every finished model: `status` is `"partial"` until
  the run completes, so an interrupted run leaves a valid, partial document.
- **One version.** `schema_version` is {SCHEMA_VERSION}; `read` rejects a document of any other version with one line
  (redraw it with the privbench that wrote it, or rerun). Every object rejects keys it does not define.
- **Strict JSON.** Non-finite floats are written as `null`.
- **Units.** ε unitless, δ a probability, accuracies and rates fractions in [0, 1] (reproduction rows and curves:
  percent), times in seconds, throughput in samples/s.
- **Types** are the Python annotations of `bench/results/` (and of the foundation's `PrivacySpent`,
  `RelationEpsilon` and `AuditDesign`, stored as they are): `None` is JSON `null`, `dict[str, X]` a JSON object with
  string keys, `list[X]` and `tuple[X, ...]` a JSON array (`tuple[X, Y]`: of exactly those items); a linked name is
  another object below. Fields without a default are required.
"""

INVERSION_METRIC_KEYS = {  # attack -> the keys of its Images.metrics (hand-written: the metrics are free-form)
    "miface": "`attack_accuracy` (fraction of reconstructions an independent classifier trained on the attacker's "
              "population assigns to the attacked class) with `attack_accuracy_lower` / `_upper` (95% "
              "Clopper-Pearson) and `chance` (1/K); `eval_classifier_test_accuracy`; `ssim_class_mean`, "
              "`mse_class_mean` (to the members' class mean), `init_ssim_class_mean` (what the starting images "
              "score); `nearest_member_mse`, `nearest_non_member_mse`, `nearest_member_ssim`, `closer_to_member`, "
              "`member_mse_ratio`, `pool_per_side`; `target_confidence`, `mean_iterations`, `stops` (`threshold` / "
              "`no-improvement` / `max-iterations` counts), `n_reconstructions`, `settings`",
    "dpmix-reconstruct": "`nearest_member_mse`, `nearest_non_member_mse`, `nearest_member_ssim`, `closer_to_member`, "
                         "`member_mse_ratio`, `pool_per_side`, `n_reconstructions`, `estimator`, `sigma`, "
                         "`mixture_degree`",
    "local-linkage": "`linkage_accuracy` with `lower` / `upper` (95% Clopper-Pearson), `chance`, `n_queries`, "
                     "`n_candidates`, `use_labels`, `sigma`; images: the person picked for the first query of each "
                     "class",
    "local-reconstruct": "`ssim_to_source`, `mse_to_source`, `prior_ssim_to_source`, `prior_mse_to_source` (the class "
                         "mean alone), `n_reconstructions`, `estimator`, `sigma`",
}

SCHEMA_NOTES = """\
## Audit counts and bounds

`Audit.counts` holds, for a family of thresholds fixed before looking at the scores (the (j+1)-th highest
non-member score and the (j+1)-th lowest member score, j in 0 and 11 log-spaced counts up to n/2), the confusion
counts `[tp, fn, fp, tn]`, with the order-statistic index j stored as `fp` (resp. `fn`). `OneRun` (one-run designs
only): m canaries, and for each guessing rule (top `k_plus` guessed included, bottom `k_minus` excluded) the
guesses r and correct guesses v. `Audit.bounds` lists every analysis the design allows (`attacks.analysis.METHODS`):
`clopper-pearson` (Jagielski et al. 2020: ln((TPR_lower − δ)/FPR_upper) over both directions and the family, each
at 1 − 0.05/(2·|family|)), `one-run` (Steinke, Nasr, Jagielski 2023, Bonferroni over the rules), `f-dp` and
`f-dp-gaussian` (Mahloujifar, Melis, Chaudhuri 2024), `gaussian-pair` (Agrawal et al. 2026, with its `fit`) and
`gdp-fit` (Nasr et al. 2023), `gaussian-llr` and `gaussian-composed`. `Bound.evidence` says which kind each is:
`valid` (assumption-free: it holds at its confidence for any mechanism; `valid` true), `estimate` (it rests on the
distributional assumption in `assumption`: never valid, never an "ε ≥", never a privacy bug; a file written before
this rule that calls a parametric bound valid is read with `valid` false) or `heuristic` (a heuristic design). Every
valid bound can be recomputed at any confidence from the stored counts (`attacks.analysis.audit_bounds`). Bounds are
capped at ε = 100. The top-level `privacy_bugs` lists every valid bound of a one-run or multi-run design that exceeds
its accountant's ε (same neighbouring relation), every rejected certified-curve test and every rejected conformance
test (exact or conservative under the certified mechanism), after a Bonferroni correction over all
`audit.comparisons` of the run (`bench all` then exits with status 3); `refuted_claims` the same for a source's
claimed ε of a mechanism without a guarantee.

## `inversion` metric keys by attack

`RunResult.inversion` holds what an attacker can *see* of the data, one [`Images`](#images) per inversion or release
attack that applied (the reports show them in the Reconstruction grids). The keys of its free-form `metrics`:

{metric_keys}

`closer_to_member` is the fraction of reconstructions nearer (MSE) a member than a non-member, from equal-size pools
(0.5: no memorisation signal); `member_mse_ratio` is nearest-member over nearest-non-member mean MSE (1: no signal,
0: copies of members). The DPMix release-membership attacks (`dpmix-mia-corr`, `dpmix-mia-lr`) return membership
scores and are stored under `attacks` like every membership attack.
""".format(metric_keys="\n".join(["| attack | metrics |", "|---|---|"]
                                 + [f"| `{attack}` | {keys} |" for attack, keys in INVERSION_METRIC_KEYS.items()]))


def _schema_models() -> list[type[BaseModel]]:
    """Every model reachable from ``Results``, depth first in field order (``Results`` first).

    The results models and the foundation's types stored as they are (``bench.core.privacy``, ``bench.core.design``).
    """
    found: list[type[BaseModel]] = []

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in found:
                return
            found.append(tp)
            for field in tp.model_fields.values():
                visit(field.annotation)
        for arg in get_args(tp):
            visit(arg)

    visit(Results)
    return found


def _type_text(tp: Any) -> str:
    """A field's annotation as text: ``float | None``, ``dict[str, [Metrics](#metrics)]``, ``tuple[str, ...]``."""
    if tp is type(None):
        return "None"
    if tp is Any:
        return "Any"
    if tp is Ellipsis:
        return "..."
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return f"[{tp.__name__}](#{tp.__name__.lower()})"
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, UnionType):
        return " | ".join(_type_text(a) for a in args)
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_type_text(a) for a in args)}]"
    return str(tp.__name__)


def _default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return f"`{value.model_dump_json()}`"
    return f"`{json.dumps(value)}`"


def _model_section(model: type[BaseModel]) -> list[str]:
    """One model's section: heading, docstring, and a table of its fields."""
    doc = inspect.cleandoc(model.__doc__ or "").replace("``", "`")
    lines = [f"## `{model.__name__}`", "", doc, "", "| field | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        description = (field.description or "").replace("``", "`")
        cells = [f"`{name}`", _type_text(field.annotation), _default_text(field), description]
        lines.append("| " + " | ".join(" ".join(c.split()).replace("|", "\\|") for c in cells) + " |")
    return lines + [""]


def schema_markdown() -> str:
    """The Markdown of ``docs/results-schema.md``: header, one section per model from ``Results`` on, the notes."""
    lines = [SCHEMA_HEADER]
    for model in _schema_models():
        lines += _model_section(model)
    return "\n".join(lines) + "\n" + SCHEMA_NOTES
