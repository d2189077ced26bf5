"""The overview page of a results folder (its ``README.md``): the answer first, then one link per page.

It reads the tables the commands committed (the study's ``best.csv`` and ``table2.csv``, ``peers/`` of
``shortlist compare``, ``shift/`` of ``shortlist shift``, ``downstream/`` of ``shortlist downstream``) and
writes nothing but ``README.md``; every command that writes into the folder rebuilds it
(:func:`experiments.pipeline.refresh_index`), so it never shows a stale answer. A part that has not run is
named as missing, never guessed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from experiments.io import atomic_write_text
from experiments.report.markdown import ci, fmt, table
from experiments.report.tables import GOAL_BASE_CONDITIONS, GOAL_TWO_SCORER_CONDITIONS, JUDGED

TITLE = "Results: how many tools should an LLM agent see?"
#: The pages an overview links, in order: (path relative to the folder, what it answers).
PAGES: tuple[tuple[str, str], ...] = (
    ("peers/README.md", "Which rule to use: learned policies beside practitioners' rules and the limits"),
    ("paper.md", "Beside the paper's main table: the BoR agent, the F1 ablation, fixed K"),
    ("two-scorers.md", "Two scorers on the same candidates"),
    ("shift/README.md", "Trained policies under scorer, benchmark and query shift"),
    ("multi-tool.md", "Several relevant tools: completeness, unknown R, equivalent tools"),
    ("synthetic/README.md", "A benchmark with a known optimum: every method as a fraction of the Bayes limit"),
    ("downstream/README.md", "Does a shorter list help the LLM pick the right tool?"),
    ("conditions.md", "Every condition of the study: methods, buckets, figures"),
    ("peers-topn/README.md", "Peers on the MetaTool top-N and multi-tool conditions"),
    ("strict/README.md", "The learners on the examined-items-only observation"),
    ("bfcl/README.md", "The README main job: BFCL with BM25 and MiniLM"),
    ("bench.md", "Speed and memory on this machine"),
)


def _read(folder: Path, name: str, needs: tuple[str, ...] = ()) -> pd.DataFrame | None:
    """The table ``folder/name``, or None when it is absent or lacks a column of ``needs`` (a part written by an
    older version of the package: :func:`verdicts` then says so rather than failing)."""
    path = folder / name
    if not path.is_file():
        return None
    frame = pd.read_csv(path)
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


def answer_table(folder: Path) -> list[str]:
    """The method to use on the goal conditions: from the comparison (every peer) where it ran, else from the
    study's own methods; one row per condition."""
    frames = [(f, "peers") for f in [_read(folder, "peers/best.csv", BEST_COLUMNS)] if f is not None]
    frames += [(f, "study") for f in [_read(folder, "best.csv", BEST_COLUMNS)] if f is not None]
    rows, seen = [], set()
    wanted = (*GOAL_BASE_CONDITIONS, *GOAL_TWO_SCORER_CONDITIONS)
    for frame, source in frames:
        for _, r in frame.iterrows():
            if r["condition"] in seen or r["condition"] not in wanted:
                continue
            seen.add(r["condition"])
            rows.append([r["condition"], f"**{r['best']}**", ci(r, JUDGED, 3),
                         f"{fmt(r['median_k'], nd=0)} / {fmt(r['p90_k'], nd=0)}", r["runner_up"],
                         f"{r['diff']:+.3f} [{r['diff_lo']:+.3f}, {r['diff_hi']:+.3f}]", source])  # fmt: skip
    if not rows:
        return ["No method table yet: run `shortlist reproduce` (and `shortlist compare` for every peer)."]
    header = ["condition", "use", "net reward [95%]", "median / p90 K", "runner-up", "best - runner-up [95% paired]",
              "among"]  # fmt: skip
    return table(header, rows)


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
        out.append(
            f"Under shift, the best BoR policy is at least the untrained largest-gap rule on "
            f"{int(shifted['at_least_gap'].sum())} of {len(shifted)} (source, target) pairs, significantly below "
            f"it on {below}."
        )
    ds = _read(folder, "downstream/answer.csv", ("sentence",))
    if ds is not None and len(ds):
        out += [str(s) for s in ds["sentence"]]
    return out


def provenance(folder: Path) -> list[str]:
    """Which command and commit made each part of the folder (from the manifests)."""
    lines = []
    for rel in ("manifest.json", *(f"{p.rsplit('/', 1)[0]}/manifest.json" for p, _ in PAGES if "/" in p)):
        path = folder / rel
        if path.is_file():
            m = json.loads(path.read_text(encoding="utf-8"))
            where = rel.rsplit("/", 1)[0] if "/" in rel else "this folder"
            sha = str(m.get("git_sha") or "?")[:7]
            lines.append(f"- `{where}`: `{m.get('command', '?')}` at commit {sha} ({len(m.get('runs', []))} runs)")
    return lines


def write_overview(folder: Path) -> Path:
    """Write ``folder/README.md``: the answer (computed from the committed tables), then the pages."""
    folder = Path(folder)
    pages = [(p, what) for p, what in PAGES if (folder / p).is_file()]
    lines = [
        f"# {TITLE}",
        "",
        "A retriever ranks the tools; a policy picks how many to show. Judged on the **net reward**: found x "
        "-log2 P_rand(K) (how much better than a random shortlist of the same size) minus the condition's cost per "
        "extra shown tool. Generated from the tables of this folder; do not edit by hand.",
        "",
        "## Answer",
        "",
        *answer_table(folder),
        "",
        *[f"- {v}" for v in verdicts(folder)],
        "",
        "## Pages",
        "",
        *[f"- [{what}]({p})" for p, what in pages],
        "",
        "## Where the numbers come from",
        "",
        "Each part is made by one command from run directories that are not committed (`runs.csv` of each part "
        "lists them with the sha256 of their tables); its manifest names the command and the commit:",
        "",
        *(provenance(folder) or ["- no manifest yet"]),
        "",
    ]
    out = folder / "README.md"
    atomic_write_text(out, "\n".join(lines))
    return out
