"""The whole results.json: the run's identity, its datasets, every model's record, the run-level audit.

And the reproduction rows and curves of ``bench reproduce``; reading and writing it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from bench.results.audit_summary import AuditSummary, PrivacyBug
from bench.results.base import SCHEMA_VERSION, Model
from bench.results.ceiling import Ceiling
from bench.results.runs import RunResult
from bench.results.tuning import RecipeChoice


class DatasetInfo(Model):
    """The split sizes of one dataset and its records' shape ``[C, H, W]`` and number of classes."""

    n_members: int
    """Training members."""
    n_non_members: int
    """Held-out non-members (the attacks' negatives)."""
    n_population: int
    """The attacker's own population (shadow models, reference models)."""
    n_test: int
    """Test records (utility)."""
    input_shape: list[int]
    """``[C, H, W]`` of one record."""
    num_classes: int
    """Number of classes."""
    format: str | None = None
    """Where the records came from: ``torchvision``, ``scikit-learn``, ``imagefolder``, ``npz``, ``csv`` or
    ``plug-in`` (None in runs written before it was recorded)."""
    source: str | None = None
    """Absolute path of the files read (None: data bundled with a library, or a plug-in)."""
    kind: str | None = None
    """``image`` or ``tabular`` (tabular records are ``[1, 1, D]`` and every mechanism trains an MLP on them)."""
    scaling: str | None = None
    """How values were mapped to [0, 1], in words; never from statistics of the private data."""
    classes: list[str] = Field(default_factory=list)
    """Class names in label order (folder names or label values) where the data names them."""
    features: list[str] = Field(default_factory=list)
    """Tabular feature names in column order (empty for images)."""


class ReproducedValues(Model):
    """Accuracy (%) over seeds: mean, sample std (0 for one seed), the seeds and each value."""

    mean: float | None
    """Mean accuracy (%) over seeds; null when every seed failed."""
    std: float | None
    """Sample standard deviation (%) over seeds (0 for one seed); null when every seed failed."""
    seeds: list[int]
    """The seeds run."""
    values: list[float]
    """The accuracy (%) of each seed."""


class ReproductionRow(Model):
    """One published figure a preset reproduces: published vs reproduced vs corrected (accuracies in %)."""

    preset: str
    """The preset (``python -m bench reproduce PRESET``)."""
    source: str
    """The publication or code the figure comes from."""
    setting: str
    """The setting of the figure in words (e.g. "DP-SGD, σ = 1.1, 10 epochs")."""
    metric: str
    """What is compared (e.g. "test accuracy (%)")."""
    published: float | None
    """The published figure (%); null for a trend the source claimed without a figure."""
    reproduced: ReproducedValues
    """Our accuracies over seeds (for a trend row: at the largest setting)."""
    status: str
    """``reproduced`` when abs(mean − published) <= REPRODUCED_WITHIN points, else ``not reproduced``; for our own
    recipes ``target met (…)`` / ``target missed (…)``; for a trend row whether it holds."""
    claimed_privacy: str | None
    """The source's privacy claim as text; null when it made none."""
    corrected_privacy: dict[str, Any] | None
    """The privacy that holds for the run as trained (the largest ε over seeds): ``{"epsilon", "delta", "accountant",
    "relation"}``, ``{"guarantee": "none"}``, or null for a trend row."""
    attacks: dict[str, dict[str, float | None]]
    """Attack name -> ``{"auc", "tpr_at_0.1%_fpr"}`` on the reproduced model, means over seeds (null where not
    measurable)."""
    notes: str
    """Why it is or is not reproduced (every point of a trend row)."""
    command: str
    """The command that produced the row."""
    wall_s: float
    """Training, evaluation and attack seconds summed over seeds (from ``timings``, so cached models do not
    shrink it)."""


class ReproductionCurve(Model):
    """Accuracy (%) against one varied setting of a preset; ``holds`` checks the source's ``claim``."""

    preset: str
    """The preset."""
    name: str
    """The curve's name (e.g. ``accuracy_vs_T``)."""
    x_label: str
    """The varied setting in words."""
    x: list[float]
    """The values of the varied setting."""
    mean: list[float | None]
    """Mean accuracy (%) over seeds at each ``x`` (null where every seed failed)."""
    std: list[float | None]
    """Standard deviation (%) over seeds at each ``x``."""
    published: list[float | None]
    """The source's figure (%) at each ``x``, null where it has none."""
    claim: str | None
    """The source's claim the curve checks; null when it made none."""
    holds: bool | None
    """Whether the claim holds; null without a claim."""
    log_x: bool
    """Whether the x-axis is logarithmic."""
    plot: str
    """File name of the plot the reports draw (``reproduction_<preset>_<name>.png``)."""


class Results(Model):
    """The whole ``results.json``.

    Written atomically after every finished model (``status`` "partial" until the run completes), so an interrupted run
    leaves a valid document.
    """

    schema_version: int = SCHEMA_VERSION
    """The contract's version (``SCHEMA_VERSION``); ``read`` rejects any other."""
    run_id: str
    """The run's name (also its output folder's)."""
    status: str = "partial"
    """``partial`` while running or after an interruption, ``complete`` when the run finished."""
    created: str
    """When the run started (ISO 8601 with time zone)."""
    config: dict[str, Any]
    """The resolved run configuration (every field of ``bench.config.run.RunConfig``), free-form."""
    versions: dict[str, str]
    """Package -> version of python, privbench, torch, opacus, dp-accounting, numpy, ... ("not installed" where
    absent)."""
    git_hash: str | None
    """``git rev-parse HEAD`` of the checkout; null outside a checkout."""
    git_dirty: bool | None
    """True when tracked files differed from ``git_hash``; null outside a checkout."""
    platform: str
    """``platform.platform()`` of the driver."""
    device: str | None
    """Where the driver evaluates and attacks (``cpu``, ``cuda``); null when unknown."""
    executor: dict[str, Any] = Field(default_factory=dict)
    """Where training jobs ran: ``{"name": "local" | "ray", "resources": {...}, ...}``, free-form; the local
    executor adds ``workers`` (training processes besides the driver), ``processes``, ``torch_threads`` (per
    process) and ``available_cpus`` (affinity and cgroup quota)."""
    wall_s: float | None = None
    """Seconds from the start of the run's first cell to the end of its last (null while partial)."""
    report_s: float | None = None
    """Seconds the last drawing of every report took (null until reports are drawn; ``bench all`` and
    ``bench report`` record it after drawing, so a report shows the previous drawing's time)."""
    datasets: dict[str, DatasetInfo] = Field(default_factory=dict)
    """Split sizes and record shape by dataset name."""
    results: list[RunResult] = Field(default_factory=list)
    """One entry per model, in the order they finished."""
    ceilings: dict[str, Ceiling] = Field(default_factory=dict)
    """The non-private ceiling by dataset: the best model trained with privacy off (the baseline or a mechanism's
    ε = ∞ point), chosen on a validation split of training images, never the test set; written when the run
    completes."""
    recipe_choices: list[RecipeChoice] = Field(default_factory=list)
    """Each mechanism's recipe re-chosen on a validation split of the run's data (``--tune-recipes``), in run order;
    empty when the run kept the profile's recipes. Written before the first cell."""
    audit: AuditSummary | None = None
    """The run-level check of every bound against its accountant's ε; written when the run completes."""
    privacy_bugs: list[PrivacyBug] = Field(default_factory=list)
    """Every valid bound that exceeds its accountant's ε significantly (``bench all`` then exits with status 3)."""
    refuted_claims: list[PrivacyBug] = Field(default_factory=list)
    """Every valid bound that exceeds a source's claimed ε for a mechanism without a guarantee (reported, not an
    exit status: there was no guarantee to break)."""
    reproduction: list[ReproductionRow] | None = None
    """Published vs reproduced vs corrected rows, written by ``bench reproduce``; null otherwise (no report section)."""
    reproduction_curves: list[ReproductionCurve] | None = None
    """Accuracy against one varied setting of a preset, written by ``bench reproduce``; null otherwise."""

    def to_json(self) -> str:
        """The document as strict JSON text, indented by one space, newline-terminated; non-finite floats as null."""
        return json.dumps(json.loads(self.model_dump_json()), indent=1, allow_nan=False) + "\n"


def read(path: str | Path) -> Results:
    """Read and check a results.json.

    Args:
        path: the results.json file.

    Returns:
        The typed document, validated against the schema of this version.

    Raises:
        ValueError: not JSON, not an object, a schema version other than ``SCHEMA_VERSION``, or a document that
            does not fit the schema (one line naming the first problem). NaN and ±Infinity, which strict JSON has
            not, read as null, as privbench writes them: an optional number reads as not measured, a required one
            fails here.
        OSError: the file cannot be read.
    """
    path = Path(path)
    try:  # NaN, ±Infinity and overflowing numbers read as null, as privbench writes them (strict JSON)
        doc = json.loads(path.read_text(encoding="utf-8"), parse_constant=lambda _: _NOT_FINITE,
                         parse_float=_finite_or_marker)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"{path}: not valid JSON ({str(exc).splitlines()[0][:200]})") from None
    not_finite: set[tuple[str | int, ...]] = set()
    doc = _nulled(doc, (), not_finite)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"{path}: schema_version {version!r} is not supported (this privbench reads "
                         f"{SCHEMA_VERSION}; redraw with the privbench that wrote it, or rerun)")
    try:
        return Results.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(x) for x in err["loc"])
        if tuple(err["loc"]) in not_finite:
            raise ValueError(f"{path}: {where}: NaN or ±inf where a finite number is required") from None
        raise ValueError(f"{path}: {where}: {err['msg']}") from None


_NOT_FINITE = object()  # NaN / ±Infinity / an overflowing number in the file, nulled by _nulled


def _finite_or_marker(text: str) -> object:
    value = float(text)
    return value if math.isfinite(value) else _NOT_FINITE


def _nulled(node: Any, where: tuple[str | int, ...], found: set[tuple[str | int, ...]]) -> Any:
    """``node`` with every non-finite number replaced by None; their locations are added to ``found``."""
    if node is _NOT_FINITE:
        found.add(where)
        return None
    if isinstance(node, dict):
        return {k: _nulled(v, (*where, k), found) for k, v in node.items()}
    if isinstance(node, list):
        return [_nulled(v, (*where, i), found) for i, v in enumerate(node)]
    return node


def write(results: Results, path: str | Path) -> Path:
    """Write ``results`` to ``path`` (folder must exist) atomically: a reader sees the old file or the new one."""
    from bench.core.io import atomic_write_text

    return atomic_write_text(path, results.to_json())
