"""A report section as data: what both renderers (``reports.markdown``, ``reports.html``) draw, and the registry.

The registry holds the sections in page order.

Design notes: docs/design-notes.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal, TypeAlias

from bench.core.registry import Registry
from bench.results import Results

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Only = Literal["", "markdown", "html"]


@dataclass(frozen=True)
class Text:
    """One paragraph.

    ``text`` may be ``markupsafe.Markup`` (inline links or code; its parts escaped by the builder) in an ``only="html"``
    block; ``css`` is the HTML class of the ``<p>`` ("note": small, muted).
    """

    kind: ClassVar[str] = "text"
    text: str
    css: str = ""
    only: Only = ""


@dataclass(frozen=True)
class Items:
    """A list of lines.

    Markdown: ``- line`` each (``style="bold"``: each line a bold paragraph; ``code``: each line in backticks), then a
    blank line even when empty. HTML: a ``<ul class=css>`` (always, even empty), or one ``<p>`` per line with
    ``style="paragraphs"``; ``code`` wraps each line in ``<code>``.
    """

    kind: ClassVar[str] = "items"
    lines: Sequence[str]
    css: str = ""
    style: Literal["bullets", "bold", "paragraphs"] = "bullets"
    code: bool = False
    only: Only = ""


@dataclass(frozen=True)
class Table:
    """A table: ``headers`` (k strings) and ``rows`` (lists of k strings).

    HTML only: ``caption``, the table's ``css`` class, one class per row (``row_css``, "" for none), one anchor per row
    (``row_ids``, "" for none) and one title per cell (``titles``: rows of k strings, "" for none; the cell's whole
    provenance, shown on hover). Markdown only: one prefix per row for its first cell (``marks``, e.g. ``"**BUG** "``;
    "" for none). A wide table scrolls inside its own box in HTML, its first column sticky.
    """

    kind: ClassVar[str] = "table"
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]
    caption: str = ""
    css: str = ""
    row_css: Sequence[str] = ()
    marks: Sequence[str] = ()
    only: Only = ""
    row_ids: Sequence[str] = ()
    titles: Sequence[Sequence[str]] = ()


@dataclass(frozen=True)
class Figures:
    """The plots named by ``names``, each with its alt text as caption.

    (stems of ``reports.plots.make_plots``' output, each drawn by a section's ``figures``; ``drawn`` keeps those that
    were.) HTML: ``grid`` lays them out side by side (``<div class="plots">``). Markdown: one image line and a blank
    line each; ``blank_if_empty``: a blank line when there is none (as the verdict always wrote). ``alt``: each plot's
    alt text by stem; ``registered_sections`` fills in the missing ones from the section's ``ReportSection.alt``.
    ``css``: the HTML class of each ``<figure>`` ("narrow": at most 760 px wide).
    """

    kind: ClassVar[str] = "figures"
    names: Sequence[str]
    grid: bool = False
    blank_if_empty: bool = False
    only: Only = ""
    alt: Mapping[str, str] = field(default_factory=dict)
    css: str = ""


@dataclass(frozen=True)
class Heading:
    """A sub-heading: HTML ``<h{level} id=anchor class=css>``, Markdown ``md_level`` (default ``level``) hashes."""

    kind: ClassVar[str] = "heading"
    text: str
    level: int = 3
    anchor: str = ""
    css: str = ""
    md_level: int | None = None
    only: Only = ""


@dataclass(frozen=True)
class Facts:
    """Key-value pairs: HTML ``<dl class="meta">``, Markdown ``- **key:** value`` lines."""

    kind: ClassVar[str] = "facts"
    pairs: Sequence[tuple[str, str]]
    only: Only = ""


@dataclass(frozen=True)
class Code:
    """Preformatted text (``language`` tags the Markdown fence): HTML ``<pre><code>``."""

    kind: ClassVar[str] = "code"
    text: str
    language: str = ""
    only: Only = ""


@dataclass(frozen=True)
class Group:
    """Blocks kept together: HTML ``<div class=css id=anchor>`` around them; Markdown draws them in turn."""

    kind: ClassVar[str] = "group"
    css: str
    blocks: Sequence[Block]
    only: Only = ""
    anchor: str = ""


@dataclass(frozen=True)
class Details:
    """Blocks collapsed under ``summary``.

    ``<details id=anchor>`` in both formats; a link to ``anchor``, or to an anchor inside, opens it in Chromium, and
    find-in-page searches it folded or not.
    """

    kind: ClassVar[str] = "details"
    summary: str
    blocks: Sequence[Block]
    only: Only = ""
    anchor: str = ""


@dataclass(frozen=True)
class Badge:
    """One status count: ``count`` ``label`` (e.g. 0 "privacy bugs"; ``count`` None: not counted, "—").

    Linking to ``anchor``; ``tone`` "bad" (red), "warn" (amber) or "good" (green).
    """

    label: str
    count: int | None
    anchor: str
    tone: Literal["good", "warn", "bad"] = "good"

    @property
    def number(self) -> str:
        """``count`` as shown: ``"0"``, or ``"—"`` when it was not counted."""
        return "—" if self.count is None else str(self.count)


@dataclass(frozen=True)
class Badges:
    """A row of status counts, each a link to its section.

    HTML ``<ul class="badges">``, Markdown one line of links separated by " · ".
    """

    kind: ClassVar[str] = "badges"
    items: Sequence[Badge]
    only: Only = ""


Block: TypeAlias = Text | Items | Table | Figures | Heading | Facts | Code | Group | Details | Badges


@dataclass(frozen=True)
class Section:
    """One section of the page: ``<section id=id>`` in HTML.

    ``## title`` in Markdown (no heading when ``title`` is empty), then its ``blocks`` in order. ``nav``: the HTML table
    of contents' entries it adds, as (anchor, label). ``only``: drawn by one renderer only (e.g. an empty section HTML
    keeps as a placeholder).
    """

    id: str
    title: str
    blocks: Sequence[Block] = ()
    nav: Sequence[tuple[str, str]] = ()
    only: Only = ""


class ReportSection:
    """Base class of a report section.

    Subclasses set ``name`` (the registry key), ``order`` (place on the page: the built-in sections use 10 to 130; 115,
    the default, puts a new one after the evidence and before Setup and guarantees), implement ``build`` and, when they
    show plots, ``figures`` and ``alt``.
    """

    name: ClassVar[str] = ""
    order: ClassVar[float] = 115

    def figures(self, results: Results) -> dict[str, Figure | None]:
        """The plots this section shows.

        Keyed by PNG stem (unique across sections; ``reports.plots.make_plots`` writes ``<stem>.png``), ``None`` where
        there is no data to draw; the default draws none.

        Args:
            results: the whole results document.
        """
        return {}

    def alt(self, stem: str) -> str:
        """The alt text (and HTML caption) of plot ``stem``: what it shows; by default the stem spelled out."""
        return stem.replace("_", " ")

    def build(self, results: Results, plots: dict[str, Path]) -> Section | None:
        """The section for this document, or None where it has nothing to show in either format.

        Args:
            results: the whole results document.
            plots: ``{stem: path}`` of the plots drawn for the document (``reports.plots.make_plots``: every
                section's ``figures``), in drawing order; a section names its own in ``Figures`` blocks.
        """
        raise NotImplementedError


SECTIONS: Registry[type[ReportSection]] = Registry("report section", base="reports.section:ReportSection")


def drawn(plots: dict[str, Path], names: Iterable[str]) -> tuple[str, ...]:
    """The stems among ``names`` that were drawn (are keys of ``plots``), in the order of ``names``."""
    return tuple(name for name in names if name in plots)


def section_classes() -> list[type[ReportSection]]:
    """Every registered section class in page order (``order``, then registration)."""
    return sorted((SECTIONS.get(name) for name in SECTIONS.names()), key=lambda cls: cls.order)


def registered_sections(results: Results, plots: dict[str, Path], renderer: Only) -> list[Section]:
    """Every registered section's ``build`` in page order (``section_classes``).

    Keeping those with something to show and, inside them, the blocks ``renderer`` draws (``only`` "" or ``renderer``),
    each ``Figures`` block with the alt text of every plot it names (the section's ``alt`` where the block gives none).
    """
    sections = []
    for cls in section_classes():
        section = cls()
        built = section.build(results, plots)
        if built is not None and built.only in ("", renderer):
            sections.append(replace(built, blocks=_shown(built.blocks, renderer, section.alt)))
    return sections


def _shown(blocks: Sequence[Block], renderer: Only, alt: Callable[[str], str]) -> tuple[Block, ...]:
    """The blocks a renderer draws, the children of groups and details included, figures with their alt text."""
    return tuple(replace(b, blocks=_shown(b.blocks, renderer, alt)) if isinstance(b, (Group, Details))
                 else replace(b, alt={name: b.alt.get(name) or alt(name) for name in b.names})
                 if isinstance(b, Figures) else b
                 for b in blocks if b.only in ("", renderer))


__all__ = ["SECTIONS", "Badge", "Badges", "Block", "Code", "Details", "Facts", "Figures", "Group", "Heading",
           "Items", "ReportSection", "Section", "Table", "Text", "drawn", "registered_sections", "section_classes"]
