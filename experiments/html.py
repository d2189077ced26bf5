"""A static site for a results folder: one HTML page per Markdown page, and a page of every table.

The pages need no server, no network and no JavaScript: open ``index.html`` from disk. Every
Markdown file of the folder and of its subfolders (``README.md``, ``paper.md``, ``peers/README.md``,
...; run directories under ``runs/`` and hidden folders are skipped) becomes one page beside
``index.html`` (:func:`page_name`: the folder's ``README.md`` is ``index.html``, ``peers/README.md``
is ``peers.html``, ``paper.md`` is ``paper.html``), rendered with a small Markdown subset renderer.
The navigation shows every page once, under its group, by its short title: both come from the
page's metadata line (:mod:`experiments.report.page`; :func:`experiments.report.page.site_pages`
orders them and makes the titles unique). The page's answer block (between its answer markers) is
its first screen: its first table and first figure sit side by side (stacked on a narrow screen,
CSS only). A link to a Markdown page leads to its HTML page, figures are embedded by relative path,
and ``tables.html`` links every CSV and shows every figure no page embeds. All text from the
Markdown is escaped; raw HTML in Markdown is shown as text, never interpreted (the page's
metadata line and answer markers are read, not shown).

Markdown subset: ATX headings (``#`` .. ``######``), paragraphs, pipe tables (header row plus
``|---|`` separator), unordered (``-``, ``*``, ``+``) and ordered (``1.``) lists, fenced code
blocks, horizontal rules, and inline code, images, links and ``**bold**``. Links and images
with a scheme other than http, https or mailto are rendered as plain text.
"""

from __future__ import annotations

import csv
import html
import os
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

from experiments.io import atomic_write_text
from experiments.report.page import SKIP_DIRS, grouped, site_pages, split_page

IMAGE_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg", ".gif", ".webp")
_SAFE_SCHEMES = ("http", "https", "mailto")

_INLINE = re.compile(
    r"(?P<code>(?P<ticks>`+)(?P<code_text>.+?)(?P=ticks))"
    r"|(?P<img>!\[(?P<img_alt>[^\]]*)\]\((?P<img_src>[^)\s]+)(?:\s+\"(?P<img_title>[^\"]*)\")?\))"
    r"|(?P<link>\[(?P<link_text>[^\]]+)\]\((?P<link_href>[^)\s]+)\))"
    r"|(?P<strong>\*\*(?P<strong_text>.+?)\*\*)"
)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$")
_HR = re.compile(r"^\s*(-{3,}|\*{3,}|_{3,})\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def slugify(text: str) -> str:
    """Lower-case id made of letters, digits and hyphens (``"x"`` if nothing is left)."""
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s or "x"


@dataclass
class Context:
    """Where a Markdown file lives, to resolve its relative links against the index page.

    Attributes:
        root: The results folder (where ``index.html`` goes).
        here: The folder of the Markdown file being rendered.
        prefix: Prefix of heading ids, unique per rendered file.
        embedded: Filled with the root-relative paths of the images rendered.
    """

    root: Path
    here: Path
    prefix: str = ""
    embedded: set[str] = field(default_factory=set)
    pages: dict[str, str] = field(default_factory=dict)
    """Root-relative path of every Markdown page -> its HTML page (links to a page lead there)."""
    _ids: set[str] = field(default_factory=set)

    def local(self, url: str) -> str | None:
        """Root-relative POSIX file path (percent-decoded) of a relative URL, or None for an
        absolute, anchor-only or scheme URL."""
        if not url or url.startswith(("#", "/")) or _SCHEME.match(url):
            return None
        rel = posixpath.relpath(self.here.as_posix(), self.root.as_posix())
        path, _, anchor = url.partition("#")
        joined = posixpath.normpath(posixpath.join(rel, unquote(path))) if path else ""
        return joined + (f"#{anchor}" if anchor else "")

    def href(self, url: str) -> str | None:
        """The URL to write into the index page (escaped later), or None when it is unsafe."""
        m = _SCHEME.match(url)
        if m:
            return url if m.group(1).lower() in _SAFE_SCHEMES else None
        local = self.local(url)
        if local is None:
            return url
        path, sep, anchor = local.partition("#")
        return quote(self.pages.get(path, path), safe="/") + sep + anchor

    def exists(self, url: str) -> bool:
        local = self.local(url)
        return local is not None and (self.root / local.partition("#")[0]).is_file()

    def new_id(self, text: str) -> str:
        base = f"{self.prefix}{slugify(text)}"
        out, i = base, 1
        while out in self._ids:
            i += 1
            out = f"{base}-{i}"
        self._ids.add(out)
        return out


def render_inline(text: str, ctx: Context) -> str:
    """Escape ``text`` and render inline code, images, links and bold.

    A code span naming an existing file (relative to the Markdown file) becomes a link to it.
    """
    out: list[str] = []
    pos = 0
    for m in _INLINE.finditer(text):
        out.append(_esc(text[pos : m.start()]))
        pos = m.end()
        if m.group("code"):
            code = m.group("code_text").strip()
            inner = f"<code>{_esc(code)}</code>"
            if " " not in code and ctx.exists(code):
                inner = f'<a href="{_esc(ctx.href(code) or "")}">{inner}</a>'
            out.append(inner)
        elif m.group("img"):
            out.append(_image(m.group("img_alt"), m.group("img_src"), m.group("img_title"), ctx))
        elif m.group("link"):
            href = ctx.href(m.group("link_href"))
            label = render_inline(m.group("link_text"), ctx)
            out.append(f'<a href="{_esc(href)}">{label}</a>' if href is not None else label)
        else:
            out.append(f"<strong>{render_inline(m.group('strong_text'), ctx)}</strong>")
    out.append(_esc(text[pos:]))
    return "".join(out)


def _image(alt: str, src: str, title: str | None, ctx: Context) -> str:
    href = ctx.href(src)
    if href is None:
        return _esc(alt)
    local = ctx.local(src)
    if local is not None:
        if not (ctx.root / local).is_file():
            return f'<span class="missing">[missing figure: {_esc(local)}]</span>'
        ctx.embedded.add(local)
    t = f' title="{_esc(title)}"' if title else ""
    return f'<img src="{_esc(href)}" alt="{_esc(alt)}"{t} loading="lazy">'


def _csv_link(image_local: str | None, ctx: Context, caption_text: str) -> str:
    """A link to the image's sibling CSV when it exists and the caption does not name it."""
    if image_local is None:
        return ""
    csv = posixpath.splitext(image_local)[0] + ".csv"
    if not (ctx.root / csv).is_file() or posixpath.basename(csv) in caption_text:
        return ""
    name = _esc(posixpath.basename(csv))
    return f' <a class="csv" href="{_esc(quote(csv, safe="/"))}">plotted numbers ({name})</a>'


def _split_row(line: str) -> list[str]:
    """Cells of a pipe-table row; ``|`` inside code spans or escaped as ``\\|`` does not split."""
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    cells, cur, in_code, i = [], [], False, 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s) and s[i + 1] == "|":
            cur.append("|")
            i += 2
            continue
        if c == "`":
            in_code = not in_code
        if c == "|" and not in_code:
            cells.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    cells.append("".join(cur).strip())
    return cells


def _is_block_start(lines: list[str], i: int) -> bool:
    line = lines[i]
    return bool(
        not line.strip()
        or _HEADING.match(line)
        or _FENCE.match(line)
        or _LIST_ITEM.match(line)
        or (line.lstrip().startswith("|") and i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1]))
    )


def render_markdown(text: str, ctx: Context) -> str:
    """HTML for a Markdown document in the subset described in the module docstring."""
    return "\n".join(_render_blocks(text, ctx))


def _render_blocks(text: str, ctx: Context) -> list[str]:
    """The HTML of each block of a Markdown document (heading, paragraph, table, list, ...), in order."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if fm := _FENCE.match(line):
            fence = fm.group(1)
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(fence):
                body.append(lines[i])
                i += 1
            i += 1
            out.append(f"<pre><code>{_esc(chr(10).join(body))}</code></pre>")
            continue
        h = _HEADING.match(line)
        if h:
            level, title = len(h.group(1)), h.group(2)
            out.append(f'<h{level} id="{ctx.new_id(title)}">{render_inline(title, ctx)}</h{level}>')
            i += 1
            continue
        if line.lstrip().startswith("|") and i + 1 < len(lines) and _TABLE_SEP.match(lines[i + 1]):
            header = _split_row(line)
            i += 2
            rows = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(_split_row(lines[i]))
                i += 1
            head = "".join(f"<th>{render_inline(c, ctx)}</th>" for c in header)
            body_rows = []
            for r in rows:
                r = (r + [""] * len(header))[: max(len(header), len(r))]
                body_rows.append("<tr>" + "".join(f"<td>{render_inline(c, ctx)}</td>" for c in r) + "</tr>")
            out.append(
                f'<div class="table"><table><thead><tr>{head}</tr></thead>'
                f"<tbody>{''.join(body_rows)}</tbody></table></div>"
            )
            continue
        if _HR.match(line):
            out.append("<hr>")
            i += 1
            continue
        if lm := _LIST_ITEM.match(line):
            ordered = lm.group(2)[0].isdigit()
            items: list[str] = []
            while i < len(lines) and lines[i].strip():
                m = _LIST_ITEM.match(lines[i])
                if m:
                    items.append(m.group(3))
                elif items:
                    items[-1] += " " + lines[i].strip()
                i += 1
            tag = "ol" if ordered else "ul"
            out.append(f"<{tag}>" + "".join(f"<li>{render_inline(t, ctx)}</li>" for t in items) + f"</{tag}>")
            continue
        para = [line.strip()]
        i += 1
        while i < len(lines) and not _is_block_start(lines, i):
            para.append(lines[i].strip())
            i += 1
        out.append(_paragraph(" ".join(para), ctx))
    return out


def render_page(text: str, ctx: Context) -> str:
    """HTML for a page's Markdown: its answer block in a ``<section class="answer">`` whose first table and first
    figure sit side by side (:func:`experiments.report.page.split_page`), the rest as :func:`render_markdown`."""
    before, answer, after = split_page(text)
    parts = [render_markdown(before, ctx)]
    if answer.strip():
        blocks = _render_blocks(answer, ctx)
        tab = next((i for i, b in enumerate(blocks) if b.startswith('<div class="table">')), None)
        fig = next((i for i, b in enumerate(blocks) if b.startswith("<figure>")), None)
        if tab is not None and fig is not None:
            pair = f'<div class="answer-pair">{blocks[tab]}\n{blocks[fig]}</div>'
            first = min(tab, fig)
            blocks = [pair if i == first else b for i, b in enumerate(blocks) if i not in (tab, fig) or i == first]
        parts.append('<section class="answer">\n' + "\n".join(blocks) + "\n</section>")
    parts.append(render_markdown(after, ctx))
    return "\n".join(p for p in parts if p)


def _paragraph(text: str, ctx: Context) -> str:
    """A paragraph; one that starts with an image becomes a figure captioned by the rest."""
    m = _INLINE.match(text)
    if m and m.group("img") and ctx.href(m.group("img_src")) is not None:
        img = _image(m.group("img_alt"), m.group("img_src"), m.group("img_title"), ctx)
        rest = text[m.end() :].strip()
        caption = render_inline(m.group("img_alt"), ctx)
        if rest:
            caption += " " + render_inline(rest, ctx)
        caption += _csv_link(ctx.local(m.group("img_src")), ctx, rest)
        return f"<figure>{img}<figcaption>{caption}</figcaption></figure>"
    return f"<p>{render_inline(text, ctx)}</p>"


def _walk(root: Path, keep: Callable[[Path], bool]) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        found += [Path(dirpath) / f for f in sorted(filenames) if not f.startswith(".") and keep(Path(dirpath) / f)]
    return found


def _csv_header(path: Path) -> list[str]:
    with path.open(encoding="utf-8", errors="replace", newline="") as f:
        return next(csv.reader(f), [])


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
       max-width: 1320px; padding: 0.6rem 1.5rem 3rem; line-height: 1.45; color: #1b1b1b; }
h1 { margin: 0.4rem 0; font-size: 1.7rem; }
nav { border-bottom: 2px solid #ddd; padding-bottom: 0.4rem; margin-bottom: 0.6rem; font-size: 0.85rem; }
nav .group { display: flex; gap: 0.8rem; align-items: baseline; margin: 0.1rem 0; }
nav .group-name { flex: 0 0 7rem; font-weight: bold; color: #555; }
nav ul { list-style: none; padding: 0; margin: 0; display: flex; flex-wrap: wrap; gap: 0.1rem 1rem; }
nav li.current a { font-weight: bold; color: #1b1b1b; }
.answer-pair { display: flex; gap: 1rem; align-items: flex-start; margin: 0.6rem 0; }
.answer-pair > .table { flex: 0 1 auto; min-width: 0; margin: 0; }
.answer-pair > .table table { font-size: 0.8rem; }
.answer-pair > .table td { white-space: nowrap; }
.answer-pair > .table td, .answer-pair > .table th { padding: 0.2rem 0.4rem; }
.answer-pair > figure { flex: 1 1 280px; min-width: 240px; margin: 0; }
@media (max-width: 900px) {
  .answer-pair { flex-direction: column; align-items: stretch; }
  .answer-pair > figure { flex-basis: auto; min-width: 0; }
  nav .group { display: block; }
}
.source { color: #666; font-size: 0.85rem; }
.table { overflow-x: auto; margin: 0.8rem 0; }
table { border-collapse: collapse; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
thead th { background: #f0f0f0; }
tbody tr:nth-child(even) { background: #fafafa; }
code { background: #f3f3f3; padding: 0 0.2em; border-radius: 3px; font-size: 0.9em; }
pre { background: #f3f3f3; padding: 0.6rem; overflow-x: auto; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: 0.85rem; color: #333; margin-top: 0.3rem; }
.missing { color: #a00; }
"""


def page_name(rel: str) -> str:
    """The HTML page of a root-relative Markdown path: ``README.md`` -> ``index.html``, ``peers/README.md``
    -> ``peers.html``, ``paper.md`` -> ``paper.html``, ``bfcl/paper.md`` -> ``bfcl-paper.html``."""
    if rel == "README.md":
        return "index.html"
    stem = rel.removesuffix("/README.md") if rel.endswith("/README.md") else rel.removesuffix(".md")
    return stem.replace("/", "-") + ".html"


#: The site's own page (every CSV and every figure no page embeds), last in the navigation.
TABLES_PAGE = ("tables.html", "All tables and figures")
Nav = list[tuple[str, list[tuple[str, str]]]]
"""The navigation: (group, [(HTML page, title), ...]) in order."""


def build_site(results_dir: Path) -> dict[str, str]:
    """The HTML text of every page of the site of ``results_dir`` (page name -> HTML; see the module docstring)."""
    root = Path(results_dir)
    metas = site_pages(root)
    pages = {m.rel: page_name(m.rel) for m in metas}
    nav: Nav = [(group, [(pages[m.rel], m.title) for m in ms]) for group, ms in grouped(metas)]
    embedded: set[str] = set()
    site = {}
    for n, m in enumerate(metas):
        src = root / m.rel
        ctx = Context(root, src.parent, prefix=f"s{n}-", embedded=embedded, pages=pages)
        source = f'<a href="{_esc(quote(m.rel, safe="/"))}">{_esc(m.rel)}</a>'
        body = render_page(src.read_text(encoding="utf-8", errors="replace"), ctx)
        site[pages[m.rel]] = _page(m.title, nav, pages[m.rel], body + f'\n<p class="source">Rendered from {source}</p>')
    site[TABLES_PAGE[0]] = _page(TABLES_PAGE[1], nav, TABLES_PAGE[0], _tables_body(root, embedded))
    return site


def _nav_html(nav: Nav, current: str) -> str:
    """The navigation: one row per group (``data-group``), its pages by title, then :data:`TABLES_PAGE`."""

    def link(href: str, label: str) -> str:
        return f'<li{" class=current" if href == current else ""}><a href="{_esc(href)}">{_esc(label)}</a></li>'

    rows = [
        f'<div class="group" data-group="{_esc(group)}"><span class="group-name">{_esc(group)}</span>'
        f"<ul>{''.join(link(href, label) for href, label in links)}</ul></div>"
        for group, links in nav
    ]
    rows.append(f'<div class="group all"><span class="group-name"></span><ul>{link(*TABLES_PAGE)}</ul></div>')
    return "<nav>\n" + "\n".join(rows) + "\n</nav>"


def _page(title: str, nav: Nav, current: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_esc(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"{_nav_html(nav, current)}\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


def _tables_body(root: Path, embedded: set[str]) -> str:
    """Every figure no page embeds (with its CSV), then a table linking every CSV."""
    parts = ["<h1>All tables and figures</h1>"]
    images = [p.relative_to(root).as_posix() for p in _walk(root, lambda p: p.suffix.lower() in IMAGE_SUFFIXES)]
    others = [p for p in images if p not in embedded]
    if others:
        ctx = Context(root, root)
        figs = [
            f"<figure>{_image(posixpath.splitext(posixpath.basename(rel))[0], rel, None, ctx)}<figcaption>"
            f"<code>{_esc(rel)}</code> (not referenced by a page){_csv_link(rel, ctx, '')}</figcaption></figure>"
            for rel in others
        ]
        parts += ["<h2>Other figures</h2>", *figs]
    rows = []
    for p in _walk(root, lambda p: p.suffix.lower() == ".csv"):
        rel = p.relative_to(root).as_posix()
        cols = _csv_header(p)
        shown = ", ".join(cols[:12]) + (f", ... ({len(cols)} columns)" if len(cols) > 12 else "")
        rows.append(
            f'<tr><td><a href="{_esc(quote(rel, safe="/"))}">{_esc(rel)}</a></td>'
            f"<td>{p.stat().st_size / 1024:.1f}</td><td>{_esc(shown)}</td></tr>"
        )
    if rows:
        parts.append(
            "<h2>Every CSV</h2>\n<p>Every CSV of the folder (run directories excluded); figures' CSVs hold exactly "
            'the plotted numbers.</p>\n<div class="table"><table><thead><tr><th>file</th><th>size (kB)</th>'
            "<th>columns</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
        )
    return "\n".join(parts)


#: What every page of a site this module writes holds (its navigation), and no other HTML file is likely to.
SITE_MARK = 'class="group" data-group="'


def write_index(results_dir: Path) -> Path:
    """Write every page of :func:`build_site` atomically into ``results_dir``; return ``index.html`` (the page of
    its README), or the tables page when the folder has no README.

    HTML pages of an earlier site whose Markdown page is gone are removed (``*.html`` beside ``index.html`` that
    this site does not write and that hold :data:`SITE_MARK`, as every page of an earlier site does), so no page
    shows a stale report; any other HTML file of the folder (yours) is left alone.
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"results folder {root} does not exist")
    site = build_site(root)
    for name, text in site.items():
        atomic_write_text(root / name, text)
    for stale in root.glob("*.html"):
        if stale.name not in site and SITE_MARK in stale.read_text(encoding="utf-8", errors="replace"):
            stale.unlink()
    return root / ("index.html" if "index.html" in site else TABLES_PAGE[0])
