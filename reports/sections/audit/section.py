"""The Audits and conformance section.

The tightness plot and its reading (the tightest valid bound against its accountant's ε), the conformance line, the
refuted claims, and folded: the audit table, the conformance tests (``reports.sections.audit.conformance``), the seeds
pooled, what this run could have caught and every analysis of every audit (``reports.sections.audit.table``).
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from bench.results import Results
from reports.bounds import BUG_MARK, REFUTED_MARK
from reports.common import finished
from reports.empirical import refuted_claim_lines
from reports.section import (
    SECTIONS,
    Block,
    Details,
    Figures,
    Items,
    ReportSection,
    Section,
    Table,
    Text,
    drawn,
)
from reports.sections.audit.conformance import CONFORMANCE_HEADERS, conformance_reading, conformance_rows
from reports.sections.audit.notes import audit_headline
from reports.sections.audit.plots import tightness_figure
from reports.sections.audit.pooled import POOLED_HEADERS, POOLED_NOTE, pooled_rows
from reports.sections.audit.table import (
    DETAIL_HEADERS,
    DETECTION_NOTE,
    audit_detail_rows,
    audit_note,
    audit_rows,
    detection_rows,
)

MARKS = {"bug": f"**{BUG_MARK}** ", "refuted": f"**{REFUTED_MARK}** "}


@SECTIONS.register()
class Audit(ReportSection):
    """The Audits and conformance section."""

    name = "audit"
    order = 40

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """``audit_tightness``: each model's tightest valid ε_LB against its ε; bugs and refuted claims ringed."""
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
                "guarantee at its claimed ε), with the dashed diagonal ε_LB = ε, a bar above each final-model audit "
                "at the run's last-iterate heuristic ε (Steinke et al. 2025: not a bound); heuristic bounds are not "
                "plotted; red "
                "rings: privacy bugs or refuted claims of the Bonferroni-corrected run-level check")

    def build(self, results: Results, plots: dict[str, Path]) -> Section:
        """The tightness plot and its one-line reading first, the refuted claims and the conformance line, then folded.

        The audit table, the conformance tests, the seeds pooled, what this run could have caught and every analysis of
        every audit. Always in HTML ("No model in this run." without rows); in Markdown only with rows, plots or power
        rows.
        """
        headers, rows, flags = audit_rows(results)
        images = drawn(plots, ["audit_tightness"])
        power_headers, power_rows = detection_rows(results)
        refuted, pooled, details = refuted_claim_lines(results), pooled_rows(results), audit_detail_rows(results)
        runs = finished(results)
        blocks: list[Block] = [Figures(images, css="narrow")]
        if rows:
            reading = " ".join((audit_headline(results, [r for r in runs if r.dataset == d]) or [""])[0]
                               for d in dict.fromkeys(r.dataset for r in runs)).strip()
            blocks += [Text(reading, "reading")] if reading else []
            blocks.append(Text(conformance_reading(results)))
        blocks += [Items(refuted, "refuted")] if refuted else []
        if rows:
            blocks.append(Details("Audit table: the accountant's ε next to the tightest valid ε_LB per threat model", [
                Table(headers, rows, css="audit-table", row_css=flags, marks=[MARKS.get(f, "") for f in flags],
                      caption="Accountant ε next to the tightest valid ε lower bound per threat model, with its "
                              "audit, design, method and confidence"),
                Text(audit_note(results), "note")], anchor="audit-table"))  # fmt: skip
        else:
            blocks.append(Text("No model in this run.", only="html"))
        conformance = conformance_rows(results)
        if conformance:
            blocks.append(Details("Conformance: every test of every audit run against its certified mechanism", [
                Table(CONFORMANCE_HEADERS, conformance, caption="Every conformance test (p-value under \"this run is "
                      "the certified mechanism\"; only the run-level check's Bonferroni level decides) and the ε "
                      "the measured parameters imply")], anchor="conformance"))  # fmt: skip
        if pooled:
            blocks.append(Details("Seeds pooled", [
                Table(list(POOLED_HEADERS), pooled, caption="White-box canary audits of one configuration's seeds "
                      "pooled into one analysis, against the accountant's ε of the audit's relation"),
                Text(POOLED_NOTE, "note")]))  # fmt: skip
        if power_rows:
            blocks.append(Details("What this run could have caught", [
                Table(power_headers, power_rows, caption="Injected bugs one run of this profile caught (exit status "
                      "3) or missed, per mechanism and target ε, with that run's tightest valid ε_LB"),
                Text(DETECTION_NOTE, "note")]))  # fmt: skip
        if details:
            blocks.append(Details("Every analysis of every audit", [Table(
                DETAIL_HEADERS, details, caption="Every analysis of every audit: its bound, whether it is valid under "
                                                 "the design alone, and its assumption")]))  # fmt: skip
        return Section("audit", "Audits and conformance", blocks, nav=[("audit", "Audits and conformance")],
                       only="" if rows or images or power_rows or pooled else "html")
