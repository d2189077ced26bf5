"""The one page writer (:mod:`experiments.report.page`), the site's grouped navigation with unique titles
(:mod:`experiments.html`), and the overview's first screen: its answer table beside a figure whose CSV is
exactly the plotted numbers (:mod:`experiments.report.overview`)."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from experiments.html import build_site, write_index
from experiments.recommend import recommend_title
from experiments.report import page as pg
from experiments.report.downstream_page import downstream_title
from experiments.report.overview import overview_title, write_overview
from experiments.report.page import (
    GROUPS,
    Bullets,
    Figure,
    Page,
    Paragraph,
    Section,
    Table,
    page_files,
    read_meta,
    render_page,
    split_page,
    write_page,
)
from experiments.report.pays_page import TITLE as PAYS_TITLE
from experiments.report.peers_page import compare_title
from experiments.report.study import scoped, study_scope
from experiments.report.tables import JUDGED
from experiments.toolsearch import DEFAULT_TITLE

REPO = Path(__file__).resolve().parents[1]


def _figure(folder: Path, rel: str = "figures/f.png") -> Figure:
    (folder / rel).parent.mkdir(parents=True, exist_ok=True)
    (folder / rel).write_bytes(b"\x89PNG\r\n")
    (folder / rel).with_suffix(".csv").write_text("x,y\n1,2\n")
    return Figure(rel, "a figure", "its caption")


def _page(folder: Path, title: str = "Which rule to use", group: str = "comparison") -> Page:
    return Page(
        title=title,
        group=group,
        lede="What the page holds.",
        answer=Section("", [Paragraph("**Answer.** It depends."), Table(["a", "b"], [[1, "x"]]), _figure(folder)]),
        sections=(
            Section("Details", [Bullets(["one", "two"])], [Section("Deeper", [Paragraph("deep text")])]),
            Section("Nothing here"),
        ),
    )


def test_a_page_renders_and_writes_atomically(tmp_path: Path) -> None:
    """Metadata line, title, lede, the answer between its markers, then the sections (an empty one left out, a
    subsection one level down); the metadata and the answer read back."""
    out = write_page(tmp_path, _page(tmp_path))
    text = out.read_text(encoding="utf-8")
    assert out == tmp_path / "README.md" and text == render_page(_page(tmp_path))
    lines = text.split("\n")
    assert lines[0] == '<!-- page {"group": "comparison", "title": "Which rule to use"} -->'
    assert lines[1:4] == ["# Which rule to use", "", "What the page holds."]
    assert read_meta(text) == ("Which rule to use", "comparison")
    before, answer, after = split_page(text)
    assert before.startswith("# Which rule to use") and "<!--" not in before + after
    assert answer.split("\n")[:3] == ["**Answer.** It depends.", "", "| a | b |"]
    assert "![a figure](figures/f.png) its caption (numbers: `figures/f.csv`)" in answer
    assert "## Details" in after and "### Deeper" in after and "- one\n- two" in after
    assert "Nothing here" not in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "figures"]  # no temporary left


def test_a_failing_render_leaves_the_old_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page naming a figure that is not there, or a render that raises, writes nothing: the old page stays."""
    old = write_page(tmp_path, _page(tmp_path)).read_text(encoding="utf-8")
    missing = Page("Which rule to use", "comparison", Section("", [Figure("figures/gone.png", "gone")]))
    with pytest.raises(FileNotFoundError, match="gone.png"):
        write_page(tmp_path, missing)

    def broken(page: Page) -> str:
        raise RuntimeError("render failed")

    monkeypatch.setattr(pg, "render_page", broken)
    with pytest.raises(RuntimeError, match="render failed"):
        write_page(tmp_path, _page(tmp_path, title="Another title"))
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "figures"]


def test_a_title_never_ends_the_metadata_comment(tmp_path: Path) -> None:
    title = "Rule for run-a-->b <x>"
    text = write_page(tmp_path, Page(title, "comparison", Section("", [Paragraph("text")]))).read_text()
    assert text.split("\n")[0].count("-->") == 1 and read_meta(text) == (title, "comparison")


def test_a_page_refuses_a_long_title_an_unknown_group_and_a_ragged_table() -> None:
    with pytest.raises(ValueError, match="page title"):
        Page("x" * (pg.MAX_TITLE + 1), "study", Section(""))
    with pytest.raises(ValueError, match="group 'results'"):
        Page("Answer", "results", Section(""))
    with pytest.raises(ValueError, match="table row 2 has 1 cells, its header 2"):
        Table(["a", "b"], [["1", "2"], ["3"]])


class _Nav(HTMLParser):
    """The <title>, and per navigation group (``data-group``) the pages it links, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.title, self.groups, self._group, self._in_title = "", {}, "", False
        self.order: list[str] = []  # start tags of <main>, in order: (tag, class)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "title":
            self._in_title = True
        elif tag == "div" and a.get("data-group"):
            self._group = str(a["data-group"])
            self.groups[self._group] = []
        elif tag == "a" and self._group and a.get("href"):
            self.groups[self._group].append([str(a["href"]), ""])
        elif tag in ("h2", "figure", "table", "section") or (tag == "div" and a.get("class") == "answer-pair"):
            self.order.append(f"{tag}.{a.get('class') or ''}")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag == "div":
            self._group = ""

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._group and self.groups[self._group]:
            self.groups[self._group][-1][1] += data


def _nav(text: str) -> _Nav:
    p = _Nav()
    p.feed(text)
    return p


def test_the_site_has_unique_titles_and_groups_every_page_once(tmp_path: Path) -> None:
    """Pages written by the writer keep their titles; the navigation shows each page once under its group (a
    nested study folder's pages under study); a page without metadata goes to ``other`` by its heading, and a
    title two pages share is followed by each page's path."""
    root = tmp_path / "results"
    written = {
        "README.md": ("Answer", "study"),
        "paper.md": ("Beside the paper", "study"),
        "bfcl/README.md": ("BFCL study", "study"),
        "bfcl/paper.md": ("BFCL: beside the paper", "study"),
        "peers/README.md": ("Which rule to use", "comparison"),
        "strict/README.md": ("Examined items only", "comparison"),
        "downstream/README.md": ("Does a shorter list help the LLM", "downstream"),
        "toolsearch/README.md": ("Tool search", "tool search"),  # a new page joins its group by naming it
        "bench.md": ("Speed and memory", "speed"),
    }
    for rel, (title, group) in written.items():
        folder = root / rel.rpartition("/")[0]
        folder.mkdir(parents=True, exist_ok=True)
        write_page(folder, _page(folder, title, group), rel.rpartition("/")[2])
    (root / "mine").mkdir()
    (root / "mine" / "README.md").write_text("# Which rule to use\n\nby hand\n")  # no metadata, a taken title
    (root / "notes.md").write_text("# Notes\n")
    site = build_site(root)
    titles = {name: _nav(text).title for name, text in site.items()}
    assert len(set(titles.values())) == len(titles), titles
    nav = _nav(site["index.html"]).groups
    assert list(nav) == [*GROUPS, "other"]
    shown = {href: (group, label) for group, links in nav.items() for href, label in links}
    assert sum(len(links) for links in nav.values()) == len(shown) == len(written) + 2  # each page once
    for rel, (title, group) in written.items():
        name = (
            "index.html"
            if rel == "README.md"
            else rel.removesuffix(".md").replace("/README", "").replace("/", "-") + ".html"
        )
        want = f"{title} (peers/README.md)" if rel == "peers/README.md" else title
        assert shown[name] == (group, want) and titles[name] == want
    assert shown["mine.html"] == ("other", "Which rule to use (mine/README.md)") and shown["notes.html"] == (
        "other",
        "Notes",
    )
    assert [href for href, _ in nav["study"]] == ["index.html", "paper.html", "bfcl.html", "bfcl-paper.html"]
    for name, text in site.items():  # every page carries the same navigation, its own entry marked current
        assert _nav(text).groups == nav and (name == "tables.html" or f'<li class=current><a href="{name}">' in text)


def committed_layout(root: Path) -> dict[str, tuple[str, str]]:
    """(title, group) of each page of a results folder as its command writes it, computed with the reports' own
    title functions from the folder's manifests and tables (for a folder written before pages had metadata)."""
    out = {}
    for path in page_files(root):
        rel, folder = path.relative_to(root).as_posix(), path.parent
        meta = read_meta(path.read_text(encoding="utf-8"))
        if meta is not None:  # written by the page writer: its own title and group
            out[rel] = meta
            continue
        man = json.loads((folder / "manifest.json").read_text()) if (folder / "manifest.json").is_file() else {}
        study = folder.parent if folder.name == "synthetic" else folder
        if (study / "aggregate.csv").is_file() and man.get("pipeline") in ("reproduce", None) and rel != "bench.md":
            scope = study_scope(list(dict.fromkeys(pd.read_csv(study / "aggregate.csv")["condition"])))
            titles = {"README.md": overview_title(folder), "paper.md": scoped("Beside the paper", scope),
                      "two-scorers.md": scoped("Two scorers", scope), "conditions.md": scoped("All conditions", scope),
                      "multi-tool.md": scoped("Several relevant tools", scope)}  # fmt: skip
            out[rel] = (scoped("Known optimum", scope) if folder != study else titles[path.name], "study")
        elif man.get("pipeline") == "compare":
            out[rel] = (compare_title(man["conditions"], man.get("observation", "auto")), "comparison")
        elif man.get("pipeline") == "shift":
            out[rel] = ("Under shift", "study")
        elif man.get("pipeline") == "downstream":
            kind = "simulated" if str(man["chooser"]).startswith("simulated") else "local"
            out[rel] = (downstream_title(kind), "downstream")
        elif (folder / "recommended" / "config.json").is_file():
            condition = json.loads((folder / "recommended" / "config.json").read_text())["condition"]
            out[rel] = (recommend_title(condition), "comparison")
        elif rel.endswith("bench.md"):
            out[rel] = ("Speed and memory", "speed")
        elif str(man.get("command", "")).startswith("shortlist toolsearch pays"):
            out[rel] = (PAYS_TITLE, "tool search")
        elif man.get("command") == "shortlist toolsearch default":
            out[rel] = (DEFAULT_TITLE, "tool search")
        else:
            raise AssertionError(f"{rel}: no command writes this page")
    return out


def test_the_committed_pages_get_unique_titles() -> None:
    """Every page of the committed results, titled as its command titles it, has a title of its own and a group:
    the full study's pages and those of the BFCL study inside it, the three comparisons, both downstream choosers
    and the three recommendations."""
    layout = committed_layout(REPO / "results")
    titles = [t for t, _ in layout.values()]
    assert len(layout) == len(page_files(REPO / "results")) >= 19
    assert len(set(titles)) == len(titles), sorted(titles)
    assert {g for _, g in layout.values()} <= set(GROUPS)
    assert layout["README.md"] == ("Answer", "study") and layout["bfcl/README.md"] == ("BFCL study", "study")
    assert layout["peers-topn/README.md"][0] == "Peers on top-N and multi-tool"
    assert layout["strict/README.md"][0] == "Examined items only"


# ----------------------------------------------------------------------------- the overview's first screen


def _aggregate(rows: list[tuple[str, str, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["condition", "method", "group", JUDGED])


def _best(condition: str, best: str, value: float) -> dict:
    return {"condition": condition, "best": best, "group": "agent", JUDGED: value, f"{JUDGED}_lo": value - 0.1,
            f"{JUDGED}_hi": value + 0.1, "median_k": 1, "p90_k": 5, "runner_up": "gap", "diff": 0.05,
            "diff_lo": -0.01, "diff_hi": 0.1}  # fmt: skip


@pytest.fixture()
def study(tmp_path: Path) -> Path:
    """A study folder with a comparison of two goal conditions (peers/) and the study's own third one."""
    root = tmp_path / "results"
    (root / "peers").mkdir(parents=True)
    peers = _aggregate([
        ("bfcl-bm25", "bor-posterior", "agent", 6.8), ("bfcl-bm25", "bor-dqn", "agent", 6.5),
        ("bfcl-bm25", "gap", "peer", 6.7), ("bfcl-bm25", "bor-threshold", "peer", 6.75),
        ("bfcl-bm25", "fixed-1", "baseline", 6.1), ("bfcl-bm25", "fixed-3", "baseline", 6.2),
        ("bfcl-bm25", "oracle", "limit", 7.9),
        ("metatool-bm25", "bor-posterior", "agent", 3.0), ("metatool-bm25", "bor-threshold", "peer", 3.1),
        ("metatool-bm25", "fixed-1", "baseline", 2.7), ("metatool-bm25", "oracle", "limit", 4.0),
    ])  # fmt: skip
    peers.to_csv(root / "peers" / "aggregate.csv", index=False)
    pd.DataFrame([_best("bfcl-bm25", "bor-posterior", 6.8), _best("metatool-bm25", "bor-threshold", 3.1)]).to_csv(
        root / "peers" / "best.csv", index=False
    )
    own = _aggregate([("bfcl-bm25", "bor-dqn", "agent", 9.0), ("toolbench-minilm", "bor-dqn", "agent", 3.2),
                      ("toolbench-minilm", "fixed-1", "baseline", 3.3)])  # fmt: skip
    own.to_csv(root / "aggregate.csv", index=False)
    pd.DataFrame([_best("bfcl-bm25", "bor-dqn", 9.0), _best("toolbench-minilm", "fixed-1", 3.3)]).to_csv(
        root / "best.csv", index=False
    )
    write_page(root / "peers", _page(root / "peers"))
    return root


def test_the_overview_figure_csv_is_exactly_the_plotted_numbers(study: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per condition of the answer table (from the comparison where it ran, else from the study): each learned
    policy, the best peer and the best fixed K minus the method to use; the figure draws exactly those."""
    import experiments.figures as figures

    drawn: list = []
    save = figures.save_png
    monkeypatch.setattr(figures, "save_png", lambda fig, png: (drawn.append(fig), save(fig, png)))
    write_overview(study)
    csv = pd.read_csv(study / "figures" / "answer.csv")
    want = {  # by hand from the tables above: (condition, method, role, best, net reward minus the best's)
        ("bfcl-bm25", "bor-posterior", "learned", True, 0.0), ("bfcl-bm25", "bor-dqn", "learned", False, -0.3),
        ("bfcl-bm25", "bor-threshold", "best peer", False, -0.05),
        ("bfcl-bm25", "fixed-3", "best fixed K", False, -0.6),
        ("metatool-bm25", "bor-posterior", "learned", False, -0.1),
        ("metatool-bm25", "bor-threshold", "best peer", True, 0.0),
        ("metatool-bm25", "fixed-1", "best fixed K", False, -0.4),
        ("toolbench-minilm", "bor-dqn", "learned", False, -0.1),
        ("toolbench-minilm", "fixed-1", "best fixed K", True, 0.0),
    }  # fmt: skip
    got = {(r.condition, r.method, r.role, bool(r.best), round(r.minus_best, 9)) for r in csv.itertuples()}
    assert got == want and len(csv) == len(want)
    assert (
        set(csv["among"]) == {"peers", "study"}
        and (csv[csv["condition"] == "toolbench-minilm"]["among"] == "study").all()
    )
    ax = drawn[0].axes[0]
    ticks = {t.get_position()[1]: t.get_text() for t in ax.get_yticklabels()}
    markers = [line for line in ax.lines if line.get_linestyle() == "None"]
    ring = markers.pop()  # the method to use, ringed, drawn last
    plotted = sorted((ticks[y], round(float(x), 9)) for line in markers for x, y in zip(*line.get_data(), strict=True))
    assert plotted == sorted((r.condition, round(r.minus_best, 9)) for r in csv.itertuples())
    assert sorted(ticks[y] for y in ring.get_ydata()) == sorted(csv[csv["best"]]["condition"])
    assert list(ring.get_xdata()) == [0.0, 0.0, 0.0]
    plt.close("all")


def test_the_overview_first_screen_is_the_answer_table_beside_its_figure(study: Path) -> None:
    """README: title, lede, then the answer block (table, figure, verdicts) before anything else; index.html: the
    table and the figure side by side in one pair, first in the page, the pages grouped in the navigation."""
    write_overview(study)
    text = (study / "README.md").read_text(encoding="utf-8")
    assert read_meta(text) == ("BFCL+ToolBench study", "study")  # a study of some benchmarks names them
    before, answer, after = split_page(text)
    assert "| condition | use |" not in before and "## " not in before
    assert answer.index("| bfcl-bm25 | **bor-posterior** |") < answer.index(
        "![Net reward by method](figures/answer.png)"
    )
    assert "No method table yet" not in answer and "Learned policies against practitioners' rules" in answer
    assert after.lstrip().startswith("## Pages") and "**comparison**: [Which rule to use](peers/README.md)" in after
    index = _nav(write_index(study).read_text(encoding="utf-8"))
    assert index.order[:4] == ["section.answer", "div.answer-pair", "table.", "figure."], index.order
    assert [g for g, links in index.groups.items() if links] == ["study", "comparison"]


def test_an_overview_without_tables_says_so_and_draws_nothing(tmp_path: Path) -> None:
    text = write_overview(tmp_path).read_text(encoding="utf-8")
    assert read_meta(text) == ("Answer", "study") and "No method table yet" in text
    assert not (tmp_path / "figures").exists()


def test_the_committed_tables_give_an_answer_figure_beside_the_table(tmp_path: Path) -> None:
    """On a copy of the committed tables: one figure row per condition of the answer table, every learned
    policy of the comparison there, and the method to use ringed at 0."""
    root = tmp_path / "results"
    for rel in ("best.csv", "aggregate.csv", "peers/best.csv", "peers/aggregate.csv"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "results" / rel, root / rel)
    write_overview(root)
    csv = pd.read_csv(root / "figures" / "answer.csv")
    best = pd.read_csv(root / "peers" / "best.csv")
    assert list(dict.fromkeys(csv["condition"])) == list(best["condition"])
    ringed = csv[csv["best"]].set_index("condition")
    assert (ringed["method"] == best.set_index("condition")["best"]).all() and (ringed["minus_best"] == 0).all()
    assert (csv["minus_best"] <= 1e-12).all()  # the method to use has the highest net reward of those shown
    agents = pd.read_csv(root / "peers" / "aggregate.csv").query("group == 'agent'")
    assert len(csv[csv["role"] == "learned"]) == len(agents[agents["condition"].isin(best["condition"])])


def test_the_overview_names_where_a_remade_reports_runs_were_made(study: Path) -> None:
    """A part whose report was remade from finished runs (its manifest's ``produced_by``) names both commits."""
    from experiments.report.overview import provenance

    made = {"git_sha": "da91e1110000", "cells_run": 2, "command": "shortlist compare"}
    manifest = {"command": "shortlist compare", "runs": ["a", "b"], "git_sha": "e45e8dc70000", "cells_run": 0,
                "produced_by": made}  # fmt: skip
    (study / "peers" / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (line,) = [x for x in provenance(study) if x.startswith("`peers`")]
    assert line.endswith("at commit e45e8dc (2 runs, made at da91e11; the report remade from them)")
    manifest |= {"cells_run": 2}  # it ran its runs itself: one commit
    (study / "peers" / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (line,) = [x for x in provenance(study) if x.startswith("`peers`")]
    assert line.endswith("at commit e45e8dc (2 runs)")


def test_the_overview_marks_a_part_made_by_other_code(study: Path) -> None:
    """A part whose manifest names another code fingerprint than this checkout's is marked, with both; this code's
    part and one that names none are not."""
    from experiments.io import code_fingerprint
    from experiments.report.overview import provenance

    manifest = {"command": "shortlist compare", "runs": ["a"], "git_sha": "a14a7470000", "cells_run": 1,
                "code_fingerprint": "6819a055" + "0" * 56}  # fmt: skip
    (study / "peers" / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (line,) = [x for x in provenance(study) if x.startswith("`peers`")]
    here = code_fingerprint()[:8]
    assert line.endswith(f"(1 run). **Made by other code** than this checkout's (code fingerprint 6819a055, here "
                         f"{here}): its numbers may not be what the command gives now; rerun it")  # fmt: skip
    for fingerprint in (code_fingerprint(), None):
        (study / "peers" / "manifest.json").write_text(json.dumps(manifest | {"code_fingerprint": fingerprint}))
        (line,) = [x for x in provenance(study) if x.startswith("`peers`")]
        assert line.endswith("at commit a14a747 (1 run)")


def test_the_overview_gives_the_shift_goal_against_every_fitted_peer(study: Path) -> None:
    """The shift bullet counts the pairs where the best BoR policy is at least every fitted peer (issue 39's goal),
    beside the gap rule's count; the unshifted rows are not pairs of the goal."""
    from experiments.report.overview import verdicts
    from experiments.report.shift_page import FITTED_PEERS

    (study / "shift").mkdir()
    gap = [("a", "a", "none", 0.1, True), ("a", "b", "query", 0.2, True), ("a", "c", "scorer", -0.1, False)]
    pd.DataFrame(gap, columns=["source", "target", "shift", "diff_hi", "at_least_gap"]).to_csv(
        study / "shift" / "versus_gap.csv", index=False
    )
    peers = [("a", "a", "none", "bor-topp", False), ("a", "b", "query", "bor-topp", True),
             ("a", "b", "query", "bor-choppy", True), ("a", "c", "scorer", "bor-topp", True),
             ("a", "c", "scorer", "bor-choppy", False)]  # fmt: skip
    pd.DataFrame(peers, columns=["source", "target", "shift", "peer", "at_least_peer"]).to_csv(
        study / "shift" / "versus_peers.csv", index=False
    )
    (line,) = [v for v in verdicts(study) if v.startswith("Under shift")]
    assert line == (
        "Under shift, the best BoR policy is at least the untrained largest-gap rule on 1 of 2 (source, target) "
        f"pairs, significantly below it on 1; at least every fitted peer ({', '.join(FITTED_PEERS)}; the goal of "
        "issue 39 under shift) on 1 of 2."
    )
    (study / "shift" / "versus_peers.csv").unlink()  # a shift folder of an older version: the gap rule alone
    (line,) = [v for v in verdicts(study) if v.startswith("Under shift")]
    assert line.endswith("significantly below it on 1.")
