"""The report's built-in sections: one module each, or a package (its ``section`` beside its own helpers).

Registered in ``reports.section.SECTIONS`` when imported (one line per section below); the page order is each section's
``order``, not the order of these lines.
"""

from __future__ import annotations

import reports.sections.attacks
import reports.sections.audit.section
import reports.sections.curves.section
import reports.sections.features.section
import reports.sections.provenance.section
import reports.sections.reconstruction.section
import reports.sections.releases
import reports.sections.reproduction.section
import reports.sections.setup
import reports.sections.throughput.section
import reports.sections.tradeoff
import reports.sections.verdict.section  # noqa: F401
