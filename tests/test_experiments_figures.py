"""Comparison figures (Pareto, registry sweep, scorer) and the static results index page."""

from __future__ import annotations

import math
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pandas as pd
import pytest

from experiments.figures import (
    candidate_set_size,
    fixed_k,
    iso_bor_found_pct,
    method_color,
    pareto_figure,
    registry_sweep_figure,
    scorer_figure,
    scorer_found_at_1,
)
from experiments.html import Context, render_markdown, write_index
from rewards import bor_aggregate

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
N = 100
COND = "syn-n100"


def assert_png(path: Path) -> None:
    assert path.is_file(), path
    assert path.read_bytes()[:8] == PNG_SIGNATURE
    assert path.stat().st_size > 1000


def summary_rows(
    cond: str,
    method: str,
    seeds: list[int],
    found: list[float],
    k: list[float],
    reward: list[float] | None = None,
) -> list[dict[str, object]]:
    reward = reward or [f / 100 * 5 for f in found]
    return [
        {
            "condition": cond,
            "method": method,
            "seed": s,
            "found_pct": f,
            "mean_k": kk,
            "std_k": 0.0,
            "bor_bits": 0.0,
            "bor_ceiling": 0.0,
            "mean_reward": rw,
            "mean_reward_net": rw - 0.01 * (kk - 1),
            "mean_p_random": kk / N,
        }
        for s, f, kk, rw in zip(seeds, found, k, reward, strict=True)
    ]


@pytest.fixture()
def summary() -> pd.DataFrame:
    rows = []
    for k, f in ((1, 50.0), (3, 70.0), (10, 85.0), (50, 98.0)):
        rows += summary_rows(COND, f"fixed-{k}", [1, 2, 3], [f] * 3, [float(k)] * 3)
    rows += summary_rows(COND, "bor-dqn", [1, 2, 3], [72.0, 75.0, 78.0], [2.0, 2.5, 4.0], [5.1, 5.3, 5.0])
    rows += summary_rows(COND, "f1-dqn", [1, 2, 3], [60.0, 62.0, 58.0], [1.2, 1.4, 1.3], [4.0, 4.2, 4.1])
    rows += summary_rows(COND, "bor-tabular", [1, 2], [70.0, 71.0], [3.0, 3.2])
    rows += summary_rows(COND, "gap", [1], [66.0], [1.8])
    rows += summary_rows("other", "bor-dqn", [1], [10.0], [1.0])
    return pd.DataFrame(rows)


@pytest.fixture()
def per_query() -> pd.DataFrame:
    gold = [1, 1, 1, 2, 5, 1, 30, 1, 3, 1]  # found@1 = 6 / 10 = 60%
    rows = []
    for method in ("fixed-1", "bor-dqn"):
        for i, g in enumerate(gold):
            rows.append(
                {
                    "condition": COND,
                    "method": method,
                    "seed": 1,
                    "qid": f"q{i}",
                    "gold_rank": g,
                    "bucket": "x",
                    "k": 1,
                    "found": int(g == 1),
                    "p_random": 1 / N,
                    "reward": 0.0,
                    "n": N,
                    "r": 1,
                }
            )
    return pd.DataFrame(rows)


def test_iso_bor_line_is_two_to_the_b_times_k_over_n() -> None:
    assert iso_bor_found_pct(3, 5, 100) == pytest.approx(40.0)
    assert iso_bor_found_pct(0, 100, 100) == pytest.approx(100.0)
    assert np.allclose(iso_bor_found_pct(1, np.array([1.0, 10.0]), 40), [5.0, 50.0])
    # A method on the line of b bits has aggregate BoR b (one relevant item, ratio of means).
    k = np.array([2, 4, 6, 8])
    found = np.array([1, 1, 0, 0])
    b = bor_aggregate(found, k, N, 1)
    assert 100 * found.mean() == pytest.approx(iso_bor_found_pct(b, k.mean(), N))


def test_names_come_from_the_registry_and_each_method_keeps_its_colour() -> None:
    """fixed K's K is read through the registry (its name field), not a second name parser; every method has
    one colour wherever it is drawn, distinct from every other registered method's."""
    from agents import registry
    from experiments.figures import method_colors

    assert [fixed_k(m) for m in ("fixed-5", "fixed-50", "bor-dqn", "gap")] == [5, 50, None, None]
    colors = method_colors()
    assert len(set(colors.values())) == len(colors)  # distinct
    assert {"bor-dqn", "f1-dqn", "bor-posterior", "gap", "oracle"} <= set(colors)
    assert method_color("bor-dqn") == colors["bor-dqn"] == method_color("bor-dqn@strict")
    assert method_color("fixed-1") != method_color("fixed-50")
    assert len(colors) == sum(3 if k.uses_reward else 1 for k in registry.KINDS.values() if not k.name_field)


def test_candidate_set_size(per_query: pd.DataFrame) -> None:
    assert candidate_set_size(per_query, COND) == N
    with pytest.raises(ValueError, match="not in"):
        candidate_set_size(per_query, "nope")
    mixed = per_query.copy()
    mixed.loc[0, "n"] = 50
    with pytest.raises(ValueError, match="mixes"):
        candidate_set_size(mixed, COND)
    multi = per_query.copy()
    multi.loc[0, "r"] = 2
    with pytest.raises(ValueError, match="R != 1"):
        candidate_set_size(multi, COND)


def test_pareto_figure_writes_png_and_exact_plotted_numbers(summary: pd.DataFrame, tmp_path: Path) -> None:
    out = tmp_path / "figs" / "pareto.png"
    plotted = pareto_figure(summary, COND, out, n=N)
    assert_png(out)
    csv = pd.read_csv(out.with_suffix(".csv"))
    pd.testing.assert_frame_equal(csv, plotted, check_dtype=False)

    methods = csv[csv["kind"] != "iso_bor"].set_index("method")
    s = summary[summary["condition"] == COND]
    assert set(methods.index) == set(s["method"])
    for m, g in s.groupby("method"):
        r = methods.loc[m]
        assert r["n_runs"] == len(g)
        for col in ("mean_k", "found_pct"):
            assert r[col] == pytest.approx(g[col].mean())
            assert r[f"{col}_min"] == pytest.approx(g[col].min())
            assert r[f"{col}_max"] == pytest.approx(g[col].max())
    assert list(methods.index) == [
        "fixed-1",
        "fixed-3",
        "fixed-10",
        "fixed-50",
        "bor-dqn",
        "bor-tabular",
        "f1-dqn",
        "gap",
    ]
    assert methods.loc["bor-dqn", "kind"] == "agent"  # the registry group
    assert methods.loc["bor-tabular", "kind"] == "agent"
    assert methods.loc["gap", "kind"] == "peer"
    assert methods.loc["fixed-10", "kind"] == "baseline"

    iso = csv[csv["kind"] == "iso_bor"]
    assert len(iso) > 0
    assert np.allclose(iso["found_pct"], 100 * 2.0 ** iso["bits"] * iso["mean_k"] / N)
    assert (iso["found_pct"] <= 100 + 1e-9).all()
    # default levels span the methods' own BoR bits log2(found / (K / N))
    own = np.log2(methods["found_pct"] / 100 * N / methods["mean_k"])
    levels = sorted(set(iso["bits"]))
    assert levels[0] <= math.floor(own.min()) + 1e-9 and levels[-1] >= math.floor(own.max())
    assert all(float(b).is_integer() for b in levels)
    # each line ends at 100% found, at K = N / 2**b (all those K lie inside the plotted range here)
    for b, line in iso.groupby("bits"):
        assert line["mean_k"].iloc[-1] == pytest.approx(N / 2**b)
        assert line["found_pct"].iloc[-1] == pytest.approx(100.0)


def test_pareto_figure_explicit_bits_and_unknown_condition(summary: pd.DataFrame, tmp_path: Path) -> None:
    plotted = pareto_figure(summary, COND, tmp_path / "p.png", n=N, bits=[2, 4])
    assert sorted(set(plotted.loc[plotted["kind"] == "iso_bor", "bits"])) == [2.0, 4.0]
    with pytest.raises(ValueError, match="not in the summary"):
        pareto_figure(summary, "missing", tmp_path / "q.png", n=N)


def test_registry_sweep_figure(tmp_path: Path) -> None:
    rows, queries = [], []
    sweeps: dict[str, list[tuple[int, str]]] = {"fam-a": [], "fam-b": []}
    rng = np.random.default_rng(0)
    for fam in sweeps:
        for n in (20, 50, 400):
            cond = f"{fam}-{n}"
            sweeps[fam].append((n, cond))
            for m in ("bor-dqn", "f1-dqn", "fixed-5", "fixed-1"):
                for seed in (1, 2, 3):  # each run: 20 test queries, K varying per query but for the fixed limits
                    k = (
                        np.full(20, 5)
                        if m == "fixed-5"
                        else np.full(20, 1)
                        if m == "fixed-1"
                        else rng.integers(1, 12, 20)
                    )
                    found = rng.random(20) < 0.8
                    reward = found * np.log2(n / k)
                    queries += [
                        {"condition": cond, "method": m, "seed": seed, "k": kk, "p_random": kk / n,
                         "reward_net": r - 0.01 * (kk - 1)} for kk, r in zip(k, reward, strict=True)
                    ]  # fmt: skip
                    rows += summary_rows(cond, m, [seed], [100 * found.mean()], [float(k.mean())], [reward.mean()])
    sweeps["fam-b"].append((3000, "fam-b-3000"))  # not run yet: skipped
    summary, per_query = pd.DataFrame(rows), pd.DataFrame(queries)
    out = tmp_path / "sweep.png"
    plotted = registry_sweep_figure(summary, sweeps, out, per_query)
    assert_png(out)
    csv = pd.read_csv(out.with_suffix(".csv"))
    pd.testing.assert_frame_equal(csv, plotted, check_dtype=False, rtol=1e-12)
    assert set(csv["method"]) == {"bor-dqn", "f1-dqn", "fixed-5"}  # fixed-1 not asked for
    assert len(csv) == 2 * 3 * 3
    for _, r in csv.iterrows():
        g = summary[(summary["condition"] == r["condition"]) & (summary["method"] == r["method"])]
        assert r["condition"] == f"{r['family']}-{r['n']}"
        assert r["n_runs"] == 3
        for col in ("mean_reward_net", "mean_reward", "mean_k", "found_pct"):
            assert r[col] == pytest.approx(g[col].mean())
            assert r[f"{col}_min"] == pytest.approx(g[col].min())
            assert r[f"{col}_max"] == pytest.approx(g[col].max())
        q = per_query[(per_query["condition"] == r["condition"]) & (per_query["method"] == r["method"])]
        assert r["ceiling_bits"] == pytest.approx(np.mean(np.log2(r["n"] / q["k"])))
        assert r["mean_reward_net"] <= r["ceiling_bits"]  # a ceiling bounds (log2(N / mean K) did not)
    fixed5 = csv[csv["method"] == "fixed-5"]
    assert np.allclose(fixed5["ceiling_bits"], np.log2(fixed5["n"] / 5))
    with pytest.raises(ValueError, match="none of the sweep"):
        registry_sweep_figure(summary, {"x": [(10, "nope")]}, tmp_path / "none.png", per_query)


def test_scorer_figure(summary: pd.DataFrame, per_query: pd.DataFrame, tmp_path: Path) -> None:
    other = pd.DataFrame(summary_rows("syn-bm25", "bor-dqn", [1, 2, 3], [90.0, 95.0, 93.0], [40.0, 80.0, 60.0]))
    s = pd.concat([summary, other], ignore_index=True)
    pq = pd.concat([per_query, per_query.assign(condition="syn-bm25", gold_rank=2)], ignore_index=True)
    assert scorer_found_at_1(pq, COND) == pytest.approx(60.0)  # 6 of 10 distinct queries, not of 20 rows
    assert scorer_found_at_1(pq, "syn-bm25") == 0.0

    out = tmp_path / "scorer.png"
    plotted = scorer_figure(s, {"MiniLM": COND, "BM25": "syn-bm25"}, out, per_query=pq)
    assert_png(out)
    csv = pd.read_csv(out.with_suffix(".csv"))
    pd.testing.assert_frame_equal(csv, plotted, check_dtype=False)
    assert list(csv["scorer"]) == ["MiniLM", "BM25"]
    bm25 = csv.set_index("scorer").loc["BM25"]
    assert bm25["mean_k"] == pytest.approx(60.0)
    assert (bm25["mean_k_min"], bm25["mean_k_max"]) == (40.0, 80.0)
    assert bm25["found_pct"] == pytest.approx(278 / 3)
    assert csv.set_index("scorer").loc["MiniLM", "scorer_found_at_1"] == pytest.approx(60.0)

    plain = scorer_figure(s, {"MiniLM": COND}, tmp_path / "plain.png", method="f1-dqn")
    assert "scorer_found_at_1" not in plain.columns
    assert plain.loc[0, "mean_k"] == pytest.approx(1.3)
    with pytest.raises(ValueError, match="no 'oracle' rows"):
        scorer_figure(s, {"MiniLM": COND}, tmp_path / "x.png", method="oracle")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(text: str) -> list[tuple[str, dict[str, str | None]]]:
    p = _Tags()
    p.feed(text)
    return p.tags


@pytest.fixture()
def results(summary: pd.DataFrame, tmp_path: Path) -> Path:
    root = tmp_path / "results"
    pareto_figure(summary, COND, root / "figures" / "pareto_syn.png", n=N)
    pareto_figure(summary, COND, root / "peers" / "figures" / "peer pareto.png", n=N)
    pareto_figure(summary, COND, root / "figures" / "unreferenced.png", n=N)
    summary.to_csv(root / "summary.csv", index=False)
    (root / "README.md").write_text(
        "# Results <script>alert('x')</script>\n\n"
        "Intro with `summary.csv`, a [peers page](peers/README.md) and a "
        "[bad link](javascript:alert) & <b>raw</b> html.\n\n"
        "| method | found % | note |\n|---|---|---|\n"
        "| bor-dqn | 75.0 | `a|b` <i>x</i> |\n| fixed-1 | 50.0 | plain |\n\n"
        "![Pareto of syn](figures/pareto_syn.png) (numbers: `figures/pareto_syn.csv`)\n\n"
        "- first item\n- second **bold** item\n\n## Section\n\n## Section\n\ntext\n"
    )
    (root / "peers").mkdir(exist_ok=True)
    (root / "peers" / "README.md").write_text(
        "# Peers\n\n![peer figure](figures/peer%20pareto.png)\n\n![gone](figures/missing.png)\n"
    )
    (root / "runs" / "r1").mkdir(parents=True)
    (root / "runs" / "r1" / "README.md").write_text("# RUN README SHOULD NOT APPEAR\n")
    return root


def test_write_index_escapes_renders_tables_and_images(results: Path) -> None:
    """One page per Markdown file (README.md -> index.html, peers/README.md -> peers.html), a page of every
    table and unreferenced figure, a navigation bar on each, links to a page leading to its HTML page."""
    out = write_index(results)
    assert out == results / "index.html"
    assert sorted(p.name for p in results.glob("*.html")) == ["index.html", "peers.html", "tables.html"]
    text = out.read_text()
    peers = (results / "peers.html").read_text()
    tables = (results / "tables.html").read_text()
    assert "<script>" not in text and "<b>raw</b>" not in text and "<i>x</i>" not in text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
    assert "&lt;b&gt;raw&lt;/b&gt;" in text
    assert "javascript:" not in text
    assert "RUN README SHOULD NOT APPEAR" not in text + peers + tables
    assert "<table>" in text
    assert "<th>method</th><th>found %</th><th>note</th>" in text
    assert "<td><code>a|b</code> &lt;i&gt;x&lt;/i&gt;</td>" in text
    assert "<li>second <strong>bold</strong> item</li>" in text
    assert 'id="s0-section"' in text and 'id="s0-section-2"' in text
    assert "missing figure: peers/figures/missing.png" in peers and (text + peers).count("missing figure") == 1
    assert '<figure><img src="peers/figures/peer%20pareto.png" alt="peer figure"' in peers
    for page in (text, peers, tables):  # the navigation of every page names every page
        assert 'href="index.html"' in page and 'href="peers.html"' in page and 'href="tables.html"' in page

    imgs = [a["src"] for page in (text, peers, tables) for t, a in _tags(page) if t == "img"]
    assert "figures/pareto_syn.png" in imgs
    assert "peers/figures/peer%20pareto.png" in imgs
    assert "figures/unreferenced.png" in imgs  # listed on the tables page
    assert tables.count('src="figures/unreferenced.png"') == 1 and "(not referenced by a page)" in tables
    assert len(imgs) == 3  # each figure once; the missing one is not an <img>
    for src in imgs:
        assert src is not None and (results / unquote(src)).is_file(), src
    hrefs = [a["href"] for page in (text, peers, tables) for t, a in _tags(page) if t == "a" and a.get("href")]
    hrefs = [h for h in hrefs if h and not h.startswith("#")]
    for h in hrefs:
        assert (results / unquote(h)).is_file(), h
    assert "figures/pareto_syn.csv" in hrefs and "summary.csv" in hrefs and "peers.html" in hrefs
    assert "peers/figures/peer%20pareto.csv" in hrefs  # sibling CSV linked in the caption
    (results / "peers" / "README.md").unlink()
    write_index(results)
    assert not (results / "peers.html").exists()  # a page whose Markdown is gone is removed


def test_render_markdown_subset() -> None:
    ctx = Context(Path("/nonexistent"), Path("/nonexistent"))
    out = render_markdown("Para one\ncontinues.\n\n1. a\n2. b\n\n```\n<x> & y\n```\n\n---\n", ctx)
    assert "<p>Para one continues.</p>" in out
    assert "<ol><li>a</li><li>b</li></ol>" in out
    assert "<pre><code>&lt;x&gt; &amp; y</code></pre>" in out
    assert "<hr>" in out
    link = render_markdown('[site](https://example.org/?a=1&b="2") [x](data:text/html,hi)', ctx)
    assert '<a href="https://example.org/?a=1&amp;b=&quot;2&quot;">site</a>' in link
    assert "data:" not in link


CHROMIUM = next(
    (shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome", "chrome") if shutil.which(b)),
    None,
)


def test_index_is_well_formed_and_renders(results: Path, tmp_path: Path) -> None:
    """index.html parses as balanced HTML whose images and links all exist; where a Chromium
    binary exists (not in CI) it is also rendered headless to a screenshot."""
    from html.parser import HTMLParser

    index = write_index(results)
    void = {"img", "meta", "br", "hr", "link", "col", "input"}

    class Checker(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.stack: list[str] = []
            self.refs: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag not in void:
                self.stack.append(tag)
            self.refs += [v for k, v in attrs if k in ("src", "href") and v and not v.startswith(("#", "http"))]

        def handle_endtag(self, tag: str) -> None:
            assert self.stack and self.stack[-1] == tag, f"unbalanced </{tag}> after {self.stack[-3:]}"
            self.stack.pop()

    checker = Checker()
    checker.feed(index.read_text(encoding="utf-8"))
    assert checker.stack == [], f"unclosed tags: {checker.stack}"
    assert checker.refs, "the index links nothing"
    from urllib.parse import unquote

    for ref in checker.refs:
        assert (index.parent / unquote(ref)).exists(), ref
    if CHROMIUM is not None:
        shot = tmp_path / "index_screenshot.png"
        subprocess.run(
            [
                str(CHROMIUM),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--window-size=1280,1600",
                f"--screenshot={shot}",
                index.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        assert_png(shot)


def test_bucket_figure_with_identical_seed_values(tmp_path: Path) -> None:
    """The mean of identical values can exceed their max by one ulp: whiskers are clipped at 0
    instead of failing with matplotlib's "'yerr' must not contain negative values"."""
    from experiments.figures import bucket_figure

    v = 0.030497950000000003  # pandas' mean of three copies exceeds the value by one ulp
    assert pd.Series([v, v, v]).mean() > v
    buckets = pd.DataFrame(
        {
            "condition": "c",
            "method": "m",
            "seed": [1, 2, 3],
            "bucket": "easy",
            "n": 10,
            "found_pct": [v] * 3,
            "mean_k": [v] * 3,
        }
    )
    bucket_figure(buckets, "c", ["m"], tmp_path / "b.png")
    assert (tmp_path / "b.png").is_file()
