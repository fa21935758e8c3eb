"""The report's built-in sections, one module each.

Registered in ``reports.section.SECTIONS`` when imported (one line per section below); the page order is each section's
``order``, not the order of these lines.
"""

from __future__ import annotations

import reports.audit.section
import reports.sections.attacks
import reports.sections.curves
import reports.sections.features
import reports.sections.provenance
import reports.sections.reconstruction
import reports.sections.releases
import reports.sections.reproduction
import reports.sections.setup
import reports.sections.throughput
import reports.sections.tradeoff
import reports.verdict.section  # noqa: F401
