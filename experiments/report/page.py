"""One page of a results folder, and the one writer of every page (:func:`write_page`).

A :class:`Page` is a short title (unique in the site), a navigation group (:data:`GROUPS`), an optional lede
(one sentence under the title), the answer block (the first screen: what the page answers, computed) and
sections of blocks: :class:`Paragraph`, :class:`Bullets`, :class:`Table` and :class:`Figure` (a PNG with its
sibling CSV of the plotted numbers). Every report module computes its tables, builds its Page and calls
:func:`write_page` once; nothing else writes a page.

The Markdown :func:`render_page` writes::

    <!-- page {"group": "comparison", "title": "Which rule to use"} -->
    # Which rule to use

    The lede.

    <!-- answer -->
    ...the answer block...
    <!-- /answer -->

    ## A section
    ...

The first line is the page's metadata, JSON inside an HTML comment (Markdown viewers do not show it): the static
site (:mod:`experiments.html`) reads the title and group from it (:func:`read_meta`) to build its navigation, and
the two answer markers tell it which part is the first screen (:func:`split_page`). A Markdown page without the
metadata line (one written by hand or by an older version) is shown under :data:`OTHER_GROUP` with its first
heading as title.

To add a page to a group, build it with that group (``group="tool search"``); :data:`PAGE_ORDER` only orders
pages within a group (a page it does not list follows the listed ones, by path).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.io import atomic_write_text

#: The navigation groups, in navigation order.
GROUPS: tuple[str, ...] = ("study", "comparison", "downstream", "tool search", "speed")
#: The group of a Markdown page that carries no metadata line (shown after :data:`GROUPS`).
OTHER_GROUP = "other"
#: Longest page title (titles are short: the navigation shows them all).
MAX_TITLE = 48
#: Where the pages of a results folder sit within their group (paths relative to the folder). A page of a
#: nested results folder (``bfcl/paper.md``) sits under that folder's README, in this order again.
PAGE_ORDER: tuple[str, ...] = (
    "README.md",
    "paper.md",
    "two-scorers.md",
    "multi-tool.md",
    "synthetic/README.md",
    "shift/README.md",
    "conditions.md",
    "bfcl/README.md",
    "peers/README.md",
    "peers-topn/README.md",
    "strict/README.md",
    "downstream/README.md",
    "downstream-simulated/README.md",
    "bench.md",
)
#: Folder names never searched for pages (run directories are many and raw).
SKIP_DIRS = frozenset({"runs", "__pycache__"})

_META = re.compile(r"^<!-- page (\{.*\}) -->$")
ANSWER_START = "<!-- answer -->"
ANSWER_END = "<!-- /answer -->"
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class Paragraph:
    """A paragraph of Markdown text (inline code, links, bold)."""

    text: str


@dataclass(frozen=True)
class Bullets:
    """An unordered list, one item per entry."""

    items: Sequence[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(self.items))


@dataclass(frozen=True)
class Table:
    """A table of text cells (already formatted; other values are shown as ``str``), every row as long as the
    header."""

    header: Sequence[object]
    rows: Sequence[Sequence[object]]

    def __post_init__(self) -> None:
        object.__setattr__(self, "header", tuple(str(h) for h in self.header))
        object.__setattr__(self, "rows", tuple(tuple(str(c) for c in r) for r in self.rows))
        for i, r in enumerate(self.rows):
            if len(r) != len(self.header):
                raise ValueError(f"table row {i + 1} has {len(r)} cells, its header {len(self.header)}: {r!r}")


@dataclass(frozen=True)
class Figure:
    """A figure of the page's folder: ``png`` (relative path) and its sibling CSV of the plotted numbers
    (the same path with ``.csv``), which the page names; ``caption`` follows the image."""

    png: str
    alt: str
    caption: str = ""

    @property
    def csv(self) -> str:
        """The sibling CSV (the plotted numbers)."""
        return posixpath.splitext(self.png)[0] + ".csv"


Block = Paragraph | Bullets | Table | Figure


@dataclass(frozen=True)
class Section:
    """A heading (none when empty), its blocks, then its subsections (one heading level down)."""

    heading: str
    blocks: Sequence[Block] = ()
    subsections: Sequence[Section] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "blocks", tuple(self.blocks))
        object.__setattr__(self, "subsections", tuple(self.subsections))

    @property
    def empty(self) -> bool:
        """Whether the section has no block, nor any subsection that has one (it is then left out)."""
        return not self.blocks and all(s.empty for s in self.subsections)

    def all_blocks(self) -> list[Block]:
        """Its blocks and those of its subsections, in order."""
        return [*self.blocks, *(b for s in self.subsections for b in s.all_blocks())]


@dataclass(frozen=True)
class Page:
    """One page of a results folder (see the module docstring)."""

    title: str
    """Short and unique in the site: what the page answers (at most :data:`MAX_TITLE` characters)."""
    group: str
    """The navigation group (one of :data:`GROUPS`)."""
    answer: Section
    """The first screen: what the page answers, computed from its tables."""
    sections: Sequence[Section] = ()
    """Everything else, in reading order."""
    lede: str = ""
    """One sentence under the title saying what the page holds (none when empty)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sections", tuple(self.sections))
        if not self.title or "\n" in self.title or len(self.title) > MAX_TITLE:
            raise ValueError(f"page title {self.title!r}: one line of 1 to {MAX_TITLE} characters")
        if self.group not in GROUPS:
            raise ValueError(f"page {self.title!r}: group {self.group!r}, expected one of {', '.join(GROUPS)}")

    @property
    def figures(self) -> list[Figure]:
        """Every figure of the page, in order."""
        return [b for s in (self.answer, *self.sections) for b in s.all_blocks() if isinstance(b, Figure)]


def table_lines(header: Sequence[object], rows: Sequence[Sequence[object]]) -> list[str]:
    """A Markdown pipe table (cells already formatted as text)."""
    out = ["| " + " | ".join(str(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out


def figure_line(alt: str, png: str, caption: str = "") -> str:
    """An image line with its sibling CSV named (every figure has one)."""
    csv = posixpath.splitext(png)[0] + ".csv"
    return f"![{alt}]({png}) {caption + ' ' if caption else ''}(numbers: `{csv}`)"


def block_lines(block: Block) -> list[str]:
    """The Markdown lines of one block."""
    if isinstance(block, Paragraph):
        return [block.text]
    if isinstance(block, Bullets):
        return [f"- {item}" for item in block.items]
    if isinstance(block, Table):
        return table_lines(block.header, block.rows)
    return [figure_line(block.alt, block.png, block.caption)]


def section_lines(section: Section, level: int = 2) -> list[str]:
    """The Markdown lines of a section (none when it is empty): its heading at ``level``, each block followed by
    a blank line, then its subsections one level down."""
    if section.empty:
        return []
    lines = [f"{'#' * level} {section.heading}", ""] if section.heading else []
    for block in section.blocks:
        lines += [*block_lines(block), ""]
    for sub in section.subsections:
        lines += section_lines(sub, level + 1)
    return lines


def meta_line(title: str, group: str) -> str:
    """The page's first line: its title and group as JSON inside an HTML comment (``>`` written as its JSON
    escape, so no title ends the comment early)."""
    meta = json.dumps({"group": group, "title": title}, sort_keys=True).replace(">", "\\u003e")
    return f"<!-- page {meta} -->"


def render_page(page: Page) -> str:
    """The Markdown of ``page`` (layout in the module docstring; an empty answer block has no markers, a section
    without blocks is left out)."""
    lines = [meta_line(page.title, page.group), f"# {page.title}", ""]
    if page.lede:
        lines += [page.lede, ""]
    if not page.answer.empty:
        lines += [ANSWER_START, *section_lines(page.answer), ANSWER_END, ""]
    for section in page.sections:
        lines += section_lines(section)
    return "\n".join(lines)


def write_page(folder: Path, page: Page, name: str = "README.md") -> Path:
    """Render ``page`` and write it atomically to ``folder/name``; return the path.

    Raises:
        FileNotFoundError: a figure of the page or its sibling CSV is not in ``folder`` (nothing is written,
            an earlier page stays as it was).
    """
    folder = Path(folder)
    for fig in page.figures:
        for rel in (fig.png, fig.csv):
            if not (folder / rel).is_file():
                raise FileNotFoundError(f"page {page.title!r}: its figure file {folder / rel} does not exist")
    text = render_page(page)
    out = folder / name
    atomic_write_text(out, text)
    return out


# ----------------------------------------------------------------------------- reading pages (the site)


@dataclass(frozen=True)
class PageMeta:
    """What the site and the overview know of a Markdown page of a results folder."""

    rel: str
    """Path relative to the results folder (POSIX)."""
    title: str
    """Its title (from the metadata line; else its first heading; made unique by :func:`site_pages`)."""
    group: str
    """Its navigation group (:data:`GROUPS`, or :data:`OTHER_GROUP` without metadata)."""


def read_meta(text: str) -> tuple[str, str] | None:
    """(title, group) of a page's metadata line (its first line), or None when it has none or it is not valid."""
    first = text.split("\n", 1)[0].strip()
    m = _META.match(first)
    if not m:
        return None
    try:
        meta = json.loads(m.group(1))
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    title, group = meta.get("title"), meta.get("group")
    if not isinstance(title, str) or not title or group not in GROUPS:
        return None
    return title, str(group)


def split_page(text: str) -> tuple[str, str, str]:
    """(before, answer, after): the page's Markdown without its metadata line, cut at the answer markers
    (``answer`` is empty when the page has none)."""
    lines = text.split("\n")
    if lines and _META.match(lines[0].strip()):
        lines = lines[1:]
    try:
        start, end = lines.index(ANSWER_START), lines.index(ANSWER_END)
    except ValueError:
        return "\n".join(lines), "", ""
    if end < start:
        return "\n".join(lines), "", ""
    return "\n".join(lines[:start]), "\n".join(lines[start + 1 : end]), "\n".join(lines[end + 1 :])


def _first_heading(text: str, fallback: str) -> str:
    return next((m.group(2) for m in map(_HEADING.match, text.splitlines()) if m), fallback)


def page_files(root: Path) -> list[Path]:
    """Every Markdown file of ``root`` and its subfolders (run directories and hidden folders skipped)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        found += [Path(dirpath) / f for f in sorted(filenames) if f.endswith(".md") and not f.startswith(".")]
    return found


def _order(rel: str) -> tuple[int, int, str]:
    """Sort key within a group: the position in :data:`PAGE_ORDER` (a nested folder's pages under its README)."""

    def at(path: str) -> int:
        return PAGE_ORDER.index(path) if path in PAGE_ORDER else len(PAGE_ORDER)

    top, _, rest = rel.partition("/")
    if not rest:
        return at(rel), -1, rel
    return at(f"{top}/README.md"), at(rest), rel


def site_pages(root: Path) -> list[PageMeta]:
    """Every page of the results folder ``root`` in navigation order (by group, then :data:`PAGE_ORDER`).

    Titles are unique: a title two pages share (pages without metadata, or two folders made by the same
    command) is followed by the page's path on each of them.
    """
    root = Path(root)
    pages = []
    for path in page_files(root):
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        meta = read_meta(text)
        title, group = meta if meta is not None else (_first_heading(text, rel), OTHER_GROUP)
        pages.append(PageMeta(rel, title, group))
    counts: dict[str, int] = {}
    for p in pages:
        counts[p.title] = counts.get(p.title, 0) + 1
    pages = [PageMeta(p.rel, f"{p.title} ({p.rel})", p.group) if counts[p.title] > 1 else p for p in pages]
    rank = {g: i for i, g in enumerate((*GROUPS, OTHER_GROUP))}
    return sorted(pages, key=lambda p: (rank[p.group], _order(p.rel)))


def grouped(pages: Sequence[PageMeta]) -> list[tuple[str, list[PageMeta]]]:
    """The pages by navigation group, groups in navigation order, empty groups left out."""
    out: dict[str, list[PageMeta]] = {}
    for p in pages:
        out.setdefault(p.group, []).append(p)
    return [(g, out[g]) for g in (*GROUPS, OTHER_GROUP) if g in out]
