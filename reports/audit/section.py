"""The Audit section (first of the evidence): refuted claims, the audit table, its note, the tightness plot, what
this run could have caught and every analysis of every audit (``reports.audit.table``)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from bench.results import Results
from reports.audit.plots import tightness_figure
from reports.audit.pooled import POOLED_HEADERS, POOLED_NOTE, pooled_rows
from reports.audit.table import (
    DETAIL_HEADERS,
    DETECTION_NOTE,
    audit_detail_rows,
    audit_note,
    audit_rows,
    detection_rows,
)
from reports.bounds import BUG_MARK, REFUTED_MARK
from reports.common import finished
from reports.empirical import refuted_claim_lines
from reports.section import (
    SECTIONS,
    Block,
    Details,
    Figures,
    Heading,
    Items,
    ReportSection,
    Section,
    Table,
    Text,
    drawn,
)

MARKS = {"bug": f"**{BUG_MARK}** ", "refuted": f"**{REFUTED_MARK}** "}


@SECTIONS.register()
class Audit(ReportSection):
    name = "audit"
    order = 20

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``audit_tightness``: every model's tightest valid ε lower bounds against its ε, the privacy bugs and
        refuted claims ringed (``reports.audit.plots``)."""
        flagged = [*results.privacy_bugs, *results.refuted_claims]
        return {"audit_tightness": tightness_figure(finished(results), flagged)}

    def alt(self, stem: str) -> str:
        """``audit_tightness``'s alt text: markers, colours and rings explained."""
        if stem != "audit_tightness":
            return super().alt(stem)
        return ("Audit tightness: per model, the tightest valid ε lower bound (95% each) of its one-run canary audits "
                "(m canaries) and multi-run audits (R runs), triangles white-box, squares hidden-state, circles "
                "black-box and diamonds black-box with an auditor-chosen initial model and canary, one colour per "
                "mechanism, against the ε of the audited run (hollow: a mechanism without a "
                "guarantee at its claimed ε), with the dashed diagonal ε_LB = ε; heuristic bounds are not plotted; red "
                "rings: privacy bugs or refuted claims of the Bonferroni-corrected run-level check")

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """Always in HTML ("No model in this run." without rows); in Markdown only with rows, plots or power rows."""
        headers, rows, flags = audit_rows(results)
        images = drawn(plots, ["audit_tightness"])
        power_headers, power_rows = detection_rows(results)
        refuted = refuted_claim_lines(results)
        blocks: list[Block] = [Items(refuted, "refuted")] if refuted else []
        if rows:
            blocks += [Table(headers, rows, css="audit-table", row_css=flags, marks=[MARKS.get(f, "") for f in flags],
                             caption="Accountant ε next to the tightest valid ε lower bound per threat model, with "
                                     "its audit, design, method and confidence"),
                       Text(audit_note(results), "note")]  # fmt: skip
        else:
            blocks.append(Text("No model in this run.", only="html"))
        blocks.append(Figures(images))
        pooled = pooled_rows(results)
        if pooled:
            blocks += [Heading("Seeds pooled"),
                       Table(list(POOLED_HEADERS), pooled, caption="White-box canary audits of one configuration's "
                             "seeds pooled into one analysis, against the accountant's ε of the audit's relation"),
                       Text(POOLED_NOTE, "note")]  # fmt: skip
        if power_rows:
            blocks += [Heading("What this run could have caught"),
                       Table(power_headers, power_rows, caption="Injected bugs one run of this profile caught (exit "
                             "status 3) or missed, per mechanism and target ε, with that run's tightest valid ε_LB"),
                       Text(DETECTION_NOTE, "note")]  # fmt: skip
        details = audit_detail_rows(results)
        if details:
            blocks.append(Details("Every analysis of every audit", [Table(
                DETAIL_HEADERS, details, caption="Every analysis of every audit: its bound, whether it is valid under "
                                                 "the design alone, and its assumption")]))  # fmt: skip
        return Section("audit", "Audit", blocks, nav=[("audit", "Audit")],
                       only="" if rows or images or power_rows or pooled else "html")
