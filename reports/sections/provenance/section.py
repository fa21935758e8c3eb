"""The Provenance section: the exact configuration, seeds, versions and git hash, and every model's settings as run.

``reports.sections.provenance.table``.
"""

from __future__ import annotations

import json
from pathlib import Path

from markupsafe import Markup

from bench.results import Results
from reports.section import SECTIONS, Code, Details, Facts, ReportSection, Section, Table, Text
from reports.sections.provenance.table import PROVENANCE_HEADERS, provenance_rows, run_facts

RESOLVED = Markup("Resolved configuration (<code>results.json</code> → <code>config</code>):")


@SECTIONS.register()
class Provenance(ReportSection):
    """The Provenance section."""

    name = "provenance"
    order = 130

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """Always; collapsed in HTML, the resolved configuration collapsed in Markdown."""
        facts, rows = run_facts(results), provenance_rows(results)
        table = Table(PROVENANCE_HEADERS, rows,
                      caption="Every model: training settings, mechanism parameters as run, model-cache key")
        config = Code(json.dumps(results.config, indent=2, sort_keys=True, default=str), "json")
        return Section("provenance", "Provenance", [
            Details("Exact configuration, seeds, versions and git hash", [
                Facts(facts), table, Text(RESOLVED), config], only="html"),
            Facts(facts, only="markdown"), Table(PROVENANCE_HEADERS, rows, only="markdown"),
            Details("Resolved configuration", [config], only="markdown"),
        ], nav=[("provenance", "Provenance")])  # fmt: skip
