"""The overview page of a results folder (its ``README.md``): the answer first, beside its figure, then every page.

It reads the tables the commands committed (the study's ``best.csv``, ``aggregate.csv`` and ``table2.csv``,
``peers/`` of ``shortlist compare``, ``shift/`` of ``shortlist shift``, ``downstream/`` of ``shortlist
downstream``) and writes nothing but ``README.md`` and its figure ``figures/answer.png`` (with
``figures/answer.csv``, the plotted numbers); every command that writes into the folder rebuilds it
(:func:`experiments.pipeline.refresh_index`), so it never shows a stale answer. A part that has not run is
named as missing, never guessed. The pages it links are those of the folder (:func:`experiments.report.page.
site_pages`), by navigation group.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from experiments.io import code_fingerprint
from experiments.produced import carried, other_code
from experiments.report.markdown import ci, fmt, runner_up_cells, same_as_best
from experiments.report.page import (
    Block,
    Bullets,
    Figure,
    Page,
    Paragraph,
    Section,
    Table,
    grouped,
    site_pages,
    write_page,
)
from experiments.report.shift_page import FITTED_PEERS, peer_goal_met
from experiments.report.tables import GOAL_BASE_CONDITIONS, GOAL_TWO_SCORER_CONDITIONS, JUDGED, best_of

#: The overview's figure (PNG; its CSV beside it).
ANSWER_FIGURE = "figures/answer.png"


def _read(folder: Path, name: str, needs: tuple[str, ...] = ()) -> pd.DataFrame | None:
    """The table ``folder/name``, or None when it is absent, empty, or lacks a column of ``needs`` (a part written by
    an older version of the package: :func:`verdicts` then says so rather than failing)."""
    path = folder / name
    if not path.is_file():
        return None
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:  # an empty table (a study without that part: no main-table condition)
        return None
    return frame if set(needs) <= set(frame.columns) else None


BEST_COLUMNS = (
    "condition",
    "best",
    JUDGED,
    f"{JUDGED}_lo",
    f"{JUDGED}_hi",
    "median_k",
    "p90_k",
    "runner_up",
    "diff",
    "diff_lo",
    "diff_hi",
)
#: The table each answer row comes from (``among``) and the aggregate its figure row reads.
SOURCES: tuple[tuple[str, str, str], ...] = (
    ("peers", "peers/best.csv", "peers/aggregate.csv"),
    ("study", "best.csv", "aggregate.csv"),
)


def overview_title(folder: Path) -> str:
    """``Answer`` for the whole study, else the scope of the folder's study (``BFCL study`` for a study of BFCL
    alone, e.g. ``results/bfcl``), so a results folder shown on its own has a title of its own."""
    from experiments.report.study import study_scope

    agg = _read(folder, "aggregate.csv", ("condition",))
    scope = study_scope(list(dict.fromkeys(agg["condition"]))) if agg is not None else ""
    return f"{scope} study" if scope else "Answer"


def answer_rows(folder: Path) -> list[tuple[str, pd.Series]]:
    """The method to use on each goal condition, (among, row of its ``best.csv``): from the comparison (every peer)
    where it ran, else from the study's own methods. A study of none of the goal conditions (a registry sweep, a
    second scorer alone) answers for each of its own conditions."""
    frames = [(source, _read(folder, best, BEST_COLUMNS)) for source, best, _ in SOURCES]
    present = {c for _, f in frames if f is not None for c in f["condition"]}
    goals = [c for c in (*GOAL_BASE_CONDITIONS, *GOAL_TWO_SCORER_CONDITIONS) if c in present]
    wanted = set(goals or present)
    rows, seen = [], set()
    for source, frame in frames:
        for _, r in frame.iterrows() if frame is not None else ():
            if r["condition"] in wanted and r["condition"] not in seen:
                seen.add(r["condition"])
                rows.append((source, r))
    return rows


def answer_table(rows: list[tuple[str, pd.Series]]) -> Block:
    """The answer table: one row per condition of :func:`answer_rows`."""
    if not rows:
        return Paragraph("No method table yet: run `shortlist reproduce` (and `shortlist compare` for every peer).")

    def use(r: pd.Series) -> str:
        same = same_as_best(r, "")
        return f"**{r['best']}**" + (f" ({same})" if same else "")

    cells = [[r["condition"], use(r), ci(r, JUDGED, 3), f"{fmt(r['median_k'], nd=0)} / {fmt(r['p90_k'], nd=0)}",
              *runner_up_cells(r), source]
             for source, r in rows]  # fmt: skip
    header = ["condition", "use", "net reward [95%]", "median / p90 K", "runner-up", "best - runner-up [95% paired]",
              "among"]  # fmt: skip
    return Table(header, cells)


def answer_points(folder: Path, rows: list[tuple[str, pd.Series]]) -> pd.DataFrame:
    """The numbers of the overview's figure (:func:`experiments.figures.answer_figure`), from the aggregate table
    each answer row's ``best.csv`` sits beside: per condition, every learned policy (group ``agent``), the best
    peer and the best fixed K (group ``baseline``), each with its net reward and that minus the method to use's.
    A condition whose aggregate is missing is left out."""
    aggs = {source: _read(folder, agg, ("condition", "method", "group", JUDGED)) for source, _, agg in SOURCES}
    out = []
    for source, r in rows:
        agg = aggs[source]
        if agg is None:
            continue
        a = agg[agg["condition"] == r["condition"]].set_index("method")
        if r["best"] not in a.index:
            continue
        picks = [(m, "learned") for m in a.index[a["group"] == "agent"]]
        for group, role in (("peer", "best peer"), ("baseline", "best fixed K")):
            if (a["group"] == group).any():
                picks.append((best_of(a.loc[a["group"] == group, JUDGED]), role))
        top = float(a.loc[r["best"], JUDGED])
        for method, role in picks:
            value = float(a.loc[method, JUDGED])
            out.append({"condition": r["condition"], "among": source, "method": method, "role": role,
                        "best": method == r["best"], JUDGED: value, "minus_best": value - top})  # fmt: skip
    return pd.DataFrame(out, columns=["condition", "among", "method", "role", "best", JUDGED, "minus_best"])


def verdicts(folder: Path) -> list[str]:
    """One computed sentence per question that has been run; a missing part is named as such."""
    out = []
    sg = _read(folder, "peers/split_goal.csv", ("two_scorer_goal", "base", "ahead", "behind"))
    if sg is None and (folder / "peers/split_goal.csv").is_file():  # there, but without the columns read
        out.append("Learned policies against practitioners' rules: `peers/` was written by an older version of the "
                   "package (its tables lack the goal columns): rerun `shortlist compare`.")  # fmt: skip
    elif sg is not None and len(sg):
        two, one = sg[sg["two_scorer_goal"]], sg[sg["base"]]
        out.append(
            f"Learned policies against practitioners' rules (net reward, paired intervals): on two scorers the best "
            f"learned policy is significantly ahead of every peer on {int(two['ahead'].sum())} of {len(two)} "
            f"conditions (behind on {int(two['behind'].sum())}); on one scorer it is significantly behind the best "
            f"peer on {int(one['behind'].sum())} of {len(one)} (ahead on {int(one['ahead'].sum())})."
        )
    else:
        out.append("Learned policies against practitioners' rules: `shortlist compare` has not written `peers/` here.")
    paired = _read(folder, "peers/paired.csv", ("peer", "agent", "diff_lo", "diff_hi"))
    if paired is not None and len(paired):
        rl = paired[(paired["peer"] == "bor-posterior") & paired["agent"].isin(["bor-dqn", "bor-tabular"])]
        if len(rl):
            ahead, behind = int((rl["diff_lo"] > 0).sum()), int((rl["diff_hi"] < 0).sum())
            out.append(
                f"RL against the supervised posterior model: RL is significantly ahead in {ahead} of {len(rl)} "
                f"(condition, RL agent) pairs and behind in {behind}."
            )
    t2 = _read(folder, "table2.csv", ("method", "paper_found_pct", "found_pct_hi", "mean_k", "paper_mean_k"))
    if t2 is not None and len(t2):
        bor = t2[(t2["method"] == "bor-dqn") & t2["paper_found_pct"].notna()]
        match = bor[(bor["found_pct_hi"] >= bor["paper_found_pct"]) & (bor["mean_k"] <= bor["paper_mean_k"] + 1e-9)]
        out.append(
            f"The paper's claim (its BoR agent's found % at its mean K): our BoR-DQN reaches it on {len(match)} of "
            f"{len(bor)} conditions" + (f" ({', '.join(match['condition'])})." if len(match) else ".")
        )
    vg = _read(folder, "shift/versus_gap.csv", ("shift", "diff_hi", "at_least_gap"))
    if vg is not None and len(vg):
        shifted = vg[vg["shift"] != "none"]
        below = int((shifted["diff_hi"] < 0).sum())
        vp = _read(folder, "shift/versus_peers.csv", ("source", "target", "shift", "at_least_peer"))
        met = peer_goal_met(vp) if vp is not None else None
        peers = (f"; at least every fitted peer ({', '.join(FITTED_PEERS)}; the goal of issue 39 under shift) on "
                 f"{int(met.sum())} of {len(met)}" if met is not None and len(met) else "")  # fmt: skip
        out.append(
            f"Under shift, the best BoR policy is at least the untrained largest-gap rule on "
            f"{int(shifted['at_least_gap'].sum())} of {len(shifted)} (source, target) pairs, significantly below "
            f"it on {below}{peers}."
        )
    ds = _read(folder, "downstream/answer.csv", ("sentence",))
    if ds is not None and len(ds):
        out += [str(s) for s in ds["sentence"]]
    return out


def pages_section(folder: Path) -> Section:
    """One list item per navigation group: a link to each page of the folder but this one."""
    pages = [p for p in site_pages(folder) if p.rel != "README.md"]
    items = [f"**{group}**: " + ", ".join(f"[{p.title}]({p.rel})" for p in ps) for group, ps in grouped(pages)]
    return Section("Pages", [Bullets(items)] if items else [])


def provenance(folder: Path) -> list[str]:
    """Which command and commit made each part of the folder (from the manifests of the folder and of each
    folder holding one of its pages); where the part's report was remade from finished runs (the manifest's
    ``produced_by`` as :func:`experiments.produced.carried` reads it), also the commit its runs were made at; a
    part made by other code than this checkout's (:func:`experiments.produced.other_code`) is marked so."""
    folders = dict.fromkeys(["", *(p.rel.rsplit("/", 1)[0] for p in site_pages(folder) if "/" in p.rel)])
    lines = []
    for where in folders:
        path = folder / where / "manifest.json"
        if path.is_file():
            m = json.loads(path.read_text(encoding="utf-8"))
            sha = str(m.get("git_sha") or "?")[:7]
            made = carried(m)
            runs_at = sha if made is None else str(made.get("git_sha") or "?")[:7]
            remade = f", made at {runs_at}; the report remade from them" if runs_at != sha else ""
            other, n = other_code(m), len(m.get("runs", []))
            stale = (f". **Made by other code** than this checkout's (code fingerprint {other[:8]}, here "
                     f"{code_fingerprint()[:8]}): its numbers may not be what the command gives now; rerun it"
                     if other else "")  # fmt: skip
            lines.append(f"`{where or 'this folder'}`: `{m.get('command', '?')}` at commit {sha} "
                         f"({n} run{'' if n == 1 else 's'}{remade}){stale}")  # fmt: skip
    return lines


def write_overview(folder: Path) -> Path:
    """Write ``folder/README.md``: the answer (computed from the committed tables) beside its figure, then the
    pages and where the numbers come from; returns its path."""
    from experiments.figures import answer_figure

    folder = Path(folder)
    rows = answer_rows(folder)
    points = answer_points(folder, rows)
    figure: list[Block] = []
    if len(points):
        answer_figure(points, folder / ANSWER_FIGURE)
        caption = ("per condition of the table: each learned policy (colour), the best peer (grey square) and the "
                   "best fixed K (light grey diamond), minus the method to use (ringed, at 0)")  # fmt: skip
        figure = [Figure(ANSWER_FIGURE, "Net reward by method", caption)]
    page = Page(
        title=overview_title(folder),
        group="study",
        lede="How many tools should an LLM agent see? A retriever ranks the tools; a policy picks how many to show. "
        "Judged on the **net reward**: found x -log2 P_rand(K) (how much better than a random shortlist of the "
        "same size) minus the condition's cost per extra shown tool. Generated from the tables of this folder; do "
        "not edit by hand.",
        answer=Section("", [answer_table(rows), *figure, Bullets(verdicts(folder))]),
        sections=(
            pages_section(folder),
            Section(
                "Where the numbers come from",
                [
                    Paragraph(
                        "Each part is made by one command from run directories that are not committed (`runs.csv` "
                        "of each part lists them with the sha256 of their tables); its manifest names the command "
                        "and the commit:"
                    ),
                    Bullets(provenance(folder) or ["no manifest yet"]),
                ],
            ),
        ),
    )
    return write_page(folder, page)
