"""The page of ``shortlist toolsearch pays``: the tool search's policies against fixed limits, end to end and in
tool-definition tokens (the tables come from :mod:`experiments.report.pays_tables`; this module formats them, draws
the figure and writes the page, the local chooser first and the simulated one as a sensitivity)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.io import atomic_write_csv, save_png, write_csv
from experiments.plan import MAX_K
from experiments.report.markdown import ci, signed_ci
from experiments.report.page import Bullets, Figure, Page, Paragraph, Section, Table, write_page

TITLE = "Does the tool search pay?"
SIMULATED = "simulated chooser, not an LLM"
#: Fewer judged requests than this and a pays on your data says its intervals are wide (as recommend says of its
#: test set).
FEW_REQUESTS = 30
#: The columns of the figure's sibling CSV: exactly the plotted numbers.
FIGURE_COLUMNS = ("chooser", "condition", "method", "policy", "tokens", "tokens_lo", "tokens_hi", "e2e_pct",
                  "e2e_pct_lo", "e2e_pct_hi")  # fmt: skip


def label(chooser: str, names: dict[str, str]) -> str:
    """How the page names a chooser: its own name, saying "simulated" for the simulated one wherever it appears."""
    name = names[chooser]
    return f"{name} ({SIMULATED})" if chooser == "simulated" and "simulated" not in name else name


def pct(r: pd.Series, col: str) -> str:
    """``83.3% [50.0, 100.0]``: a percentage with its interval (none when it is empty)."""
    lo, hi = r[f"{col}_lo"], r[f"{col}_hi"]
    return f"{r[col]:.1f}%" + (f" [{lo:.1f}, {hi:.1f}]" if hi > lo else "")


def method_name(r: pd.Series) -> str:
    """``default (bor-posterior)``; a fixed limit by its own name."""
    return r["method"] if r["method"] == r["policy"] else f"{r['method']} ({r['policy']})"


def pays_figure(
    methods: pd.DataFrame, names: dict[str, str], out_png: Path, shown: str = "gold shown and chosen"
) -> pd.DataFrame:
    """End-to-end % against mean tool tokens per request, one panel per chooser, one point per method and
    condition with both intervals as error bars, the fixed limits of a condition joined by a line (PNG + CSV)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    choosers = list(dict.fromkeys(methods["chooser"]))
    fig, axes = plt.subplots(1, len(choosers), figsize=(6.4 * len(choosers), 4.8), squeeze=False)
    colors = {c: plt.get_cmap("tab10")(i) for i, c in enumerate(dict.fromkeys(methods["condition"]))}
    markers = {"default": "o", "recommended": "^"}
    handles = [Line2D([], [], color=c, lw=6, label=cond) for cond, c in colors.items()]
    handles += [Line2D([], [], color="0.3", marker=m, ls="none", label=f"{name} policy") for name, m in markers.items()]
    handles.append(Line2D([], [], color="0.3", marker="s", ms=5, label="fixed K (joined)"))
    for ax, chooser in zip(axes[0], choosers, strict=True):
        for cond, g in methods[methods["chooser"] == chooser].groupby("condition", sort=False):
            fixed = g[~g["method"].isin(list(markers))].sort_values("tokens")
            ax.plot(fixed["tokens"], fixed["e2e_pct"], color=colors[cond], lw=1, alpha=0.7)
            for _, r in g.iterrows():
                xerr = np.array([[r["tokens"] - r["tokens_lo"]], [r["tokens_hi"] - r["tokens"]]]).clip(0)
                yerr = np.array([[r["e2e_pct"] - r["e2e_pct_lo"]], [r["e2e_pct_hi"] - r["e2e_pct"]]]).clip(0)
                ax.errorbar([r["tokens"]], [r["e2e_pct"]], xerr=xerr, yerr=yerr, color=colors[cond], capsize=3,
                            marker=markers.get(r["method"], "s"), ms=7 if r["method"] in markers else 5)  # fmt: skip
                if r["method"] not in markers:
                    ax.annotate(r["method"], (r["tokens"], r["e2e_pct"]), textcoords="offset points",
                                xytext=(4, -10), fontsize=7, color=colors[cond])  # fmt: skip
        ax.set_xlabel("tool-definition tokens per request (mean)")
        ax.set_ylabel(f"end-to-end % ({shown})")
        ax.set_ylim(0, 102)
        ax.set_title(label(chooser, names).split(" (a=")[0], fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(handles=handles, fontsize=7, loc="best")
    fig.suptitle("The tool search's policies against fixed limits (whiskers: 95% query bootstrap)")
    fig.tight_layout()
    save_png(fig, out_png)
    plotted = methods[list(FIGURE_COLUMNS)]
    atomic_write_csv(plotted, out_png.with_suffix(".csv"))
    return plotted


def methods_lines(methods: pd.DataFrame, cap: int = MAX_K) -> Table:
    """One chooser's methods: K, the capped count, presented %, end-to-end % and tokens with their intervals."""
    rows = [[r["condition"], method_name(r), f"{r['mean_policy_k']:.2f} (max {int(r['max_policy_k'])})",
             f"{r['mean_k']:.2f}", f"{int(r['n_capped'])} of {int(r['n_queries'])}", f"{r['presented_pct']:.1f}",
             pct(r, "e2e_pct"), ci(r, "tokens", 0), ci(r, "tokens_uncapped", 0) if r["n_capped"] else "-"]
            for _, r in methods.iterrows()]  # fmt: skip
    header = ["condition", "method", "policy's mean K", f"mean K shown (cap {cap})", "K capped", "presented %",
              "end to end [95%]", "tool tokens per request [95%]", "tool tokens, K uncapped"]  # fmt: skip
    return Table(header, rows)


def paired_lines(paired: pd.DataFrame) -> Table:
    """One chooser's paired differences: each adaptive method minus each fixed limit."""
    rows = [[r["condition"], r["method"], r["fixed"],
             signed_ci(r, "e2e_diff", 1), r["e2e_verdict"], signed_ci(r, "tokens_diff", 0), r["tokens_verdict"],
             f"{signed_ci(r, 'tokens_uncapped_diff', 0)} ({r['tokens_uncapped_verdict']})"]
            for _, r in paired.iterrows()]  # fmt: skip
    header = ["condition", "method", "minus", "end-to-end points [95% paired]", "end to end", "tool tokens [95% paired]",
              "tokens", "tool tokens, K uncapped"]  # fmt: skip
    return Table(header, rows)


def best_lines(methods: pd.DataFrame, cap: int = MAX_K) -> list[str]:
    """Per condition: the method with the highest end-to-end % and its token cost, beside the fixed limits."""
    out = []
    for cond, g in methods.groupby("condition", sort=False):
        best = g.loc[g["e2e_pct"].idxmax()]
        tied = [method_name(r) for _, r in g.iterrows() if r.name != best.name and r["e2e_pct"] == best["e2e_pct"]]
        fixed = "; ".join(f"{r['method']} {r['e2e_pct']:.1f}% at {r['tokens']:.0f}" for _, r in g.iterrows()
                          if r["method"] == r["policy"])  # fmt: skip
        capped = "".join(
            f" {method_name(r)} wanted more than {cap} tools on {int(r['n_capped'])} of {int(r['n_queries'])} queries "
            f"(up to {int(r['max_policy_k'])}; shown the top {cap}): without the cap it would send "
            f"{ci(r, 'tokens_uncapped', 0)} tool tokens per request, not {r['tokens']:.0f}."
            for _, r in g.iterrows() if r["n_capped"]
        )  # fmt: skip
        out.append(
            f"{cond}: the highest end to end is {method_name(best)}"
            + (f" (tied with {', '.join(tied)})" if tied else "")
            + f", {pct(best, 'e2e_pct')}, at {ci(best, 'tokens', 0)} tool tokens per request (mean K "
            f"{best['mean_k']:.2f}). Fixed limits: {fixed} tokens.{capped}"
        )
    return out


def versus_lines(paired: pd.DataFrame) -> list[str]:
    """Per (condition, adaptive method): its paired differences from each fixed limit, in words and numbers."""
    out = []
    for (cond, method), g in paired.groupby(["condition", "method"], sort=False):
        parts = [f"{r['fixed']}: end to end {signed_ci(r, 'e2e_diff', 1)} points ({r['e2e_verdict']}), tokens "
                 f"{signed_ci(r, 'tokens_diff', 0)} ({r['tokens_verdict']})"
                 + (f", uncapped {signed_ci(r, 'tokens_uncapped_diff', 0)} ({r['tokens_uncapped_verdict']})"
                    if r["tokens_uncapped_diff"] != r["tokens_diff"] else "")
                 for _, r in g.iterrows()]  # fmt: skip
        out.append(f"{cond}, {method} minus " + "; ".join(parts) + ".")
    return out


def tally(paired: pd.DataFrame, pairs: str = "(scorer, adaptive policy, fixed limit)") -> str:
    """How many (condition, adaptive method, fixed limit) pairs are significantly higher, lower or neither."""
    e, t = paired["e2e_verdict"].value_counts(), paired["tokens_verdict"].value_counts()
    return (
        f"Over the {len(paired)} {pairs} pairs, the adaptive policy's end to end is "
        f"significantly higher in {e.get('higher', 0)}, lower in {e.get('lower', 0)} and within noise in "
        f"{e.get('within noise', 0)}; it sends significantly fewer tool tokens in {t.get('fewer', 0)}, more in "
        f"{t.get('more', 0)} and within noise in {t.get('within noise', 0)} (paired 95% intervals over queries)."
    )


def accuracy_line(rows: pd.DataFrame, chooser: str, name: str, gold: str = "the gold tool is", it: str = "it") -> str:
    """How often the chooser picks the gold when it is among the K shown (``gold``: how the page names that), at each
    fixed limit (every condition's queries pooled): the cost of every extra tool for this chooser."""
    fixed = rows[(rows["chooser"] == chooser) & (rows["method"] == rows["policy"]) & (rows["presented"] == 1)]
    acc = fixed.groupby("k", sort=True)["e2e"].agg(["mean", "size"])
    at = ", ".join(f"{100 * r['mean']:.0f}% at K = {k} ({int(r['size'])} lists)" for k, r in acc.iterrows())
    return f"Given {gold} among the K shown, {name} picks {it} {at}."


def chooser_sections(methods: pd.DataFrame, paired: pd.DataFrame, heading: str, cap: int = MAX_K) -> list[Section]:
    """The two tables of one chooser under ``heading``."""
    return [
        Section(f"{heading}: end to end and tokens per method", [methods_lines(methods, cap)]),
        Section(f"{heading}: adaptive minus fixed, paired over queries", [paired_lines(paired)]),
    ]


def policy_lines(about: dict[str, dict[str, Any]]) -> list[str]:
    """What was evaluated as ``default`` and ``recommended`` for each condition (from the command's records)."""
    out = []
    for cond, a in about.items():
        d, r = a["default"], a["recommended"]
        if d["evaluated"] == "leave-bfcl-out":
            trained = ", ".join(f"{b} {n}" for b, n in d["trained_on"].items())
            out.append(
                f"{cond} default: the shipped `{d['shipped']}` ({d['method']}) was trained on "
                + ", ".join(f"{b} {n}" for b, n in d["shipped_trained_on"].items())
                + " queries, BFCL's test queries among them, so it is **not** evaluated here: the policy the "
                f"leave-one-benchmark-out table judged on BFCL is, the same kind, settings and seed fitted on "
                f"{trained} queries (its BFCL net reward {d['bfcl_net_reward']:.6f}, the table's "
                f"{d['lobo_bfcl_net_reward']:.6f})."
            )
        else:
            out.append(f"{cond} default: the shipped `{d['shipped']}` ({d['method']}), trained on "
                       + ", ".join(f"{b} {n}" for b, n in d["shipped_trained_on"].items()) + " queries (no BFCL).")  # fmt: skip
        out.append(
            f"{cond} recommended: `{r['command']}` on the {r['log_queries']} BFCL training queries as a log (request "
            f"and gold tool; recommend's own split: {r['log_train']} to train, {r['log_test']} to rank), which "
            f"chose **{r['kind_chosen']}** by {r['selection']} and saved it as the searcher ({r['method']})."
        )
    return out


def ranking_line(about: dict[str, dict[str, Any]], cap: int) -> str:
    """What the ranking check found beyond the top ``cap``, per condition (from the command's records)."""
    parts = []
    for cond, a in about.items():
        r = a["ranking"]
        differ = r["differ_beyond_top"]
        where = ", ".join(f"`{q}` from rank {k}" for q, k in differ.items())
        parts.append(
            f"{cond}: the whole ranking is the condition's on {r['queries'] - len(differ)} of {r['queries']} queries"
            + (f"; on {where}, near-tied tools change places" if differ else "")
            + f" (the largest score difference {r['max_abs_score_diff']:.2g})"
        )
    return "Beyond rank " + str(cap) + ", " + "; ".join(parts) + "."


def how_made(
    about: dict[str, dict[str, Any]], tokenizer: dict[str, str], command: str, cap: int, methods: pd.DataFrame
) -> Section:
    """The section saying how the numbers were made: the queries and the ranking check, the policies evaluated,
    the cap, what end to end and tokens are, the intervals and the command."""
    capped = methods[methods["chooser"] == "local"].set_index(["condition", "method"])["n_capped"]
    n = int(methods["n_queries"].iloc[0])
    return Section("How these numbers were made", [
        Paragraph(
            f"The {n} test queries of split 0 of each BFCL condition (the downstream study's: "
            "[results/downstream/](../downstream/README.md)), each ranking the registry's 370 functions with "
            "a `ToolSearch` built from BFCL's schemas with the condition's scorer, checked against the "
            f"condition's ranking of every test query: the top {cap} tool for tool (so the chooser's committed "
            "answers are answers to these very shortlists; the command stops at a query that differs) and "
            "every score within 1e-5. " + ranking_line(about, cap)
        ),
        Bullets(policy_lines(about)),
        Paragraph(
            f"Every K is capped at {cap}: the chooser answered the prefixes up to {cap} only. A policy wanted "
            f"more than {cap} tools on " + ", ".join(f"{c} {m} {int(v)} of {n}" for (c, m), v in capped.items()
                                                     if m in ("default", "recommended"))
            + " queries (column `K capped`; the end to end and the tokens are those of the top "
            f"{cap})."
        ),
        Paragraph(
            "End to end: the chooser, shown the top K, called the gold tool (`correct` of the committed "
            "answers at (query, K); a top K without the gold is a miss, and a top K holding it without an "
            "answer stops the command). Tool-definition tokens: the shown tools' OpenAI `tools` array as the "
            "package's OpenAI chooser sends it (`choosers.openai_api.tools_json`: the API-safe names, BFCL's "
            "types mapped to JSON schema types, compact JSON as httpx encodes it), counted with the local "
            f"chooser's tokenizer: {tokenizer['model']} (GGUF sha256 `{tokenizer['gguf_sha256']}`, "
            f"{tokenizer['tokenizer']} read by transformers {tokenizer['transformers']}, tokenizer.json sha256 "
            f"`{tokenizer['tokenizer_json_sha256']}`), no special tokens. A provider wraps the array in its "
            "own prompt template, which adds tokens per tool that no client can count."
        ),
        Paragraph(
            "Intervals: 95% percentile bootstrap over the test queries, the same resamples for every method "
            "of a condition and chooser, so each difference is paired; `higher` / `lower` when the interval "
            "excludes 0. Tables: `methods.csv`, `paired.csv`, `per_query.csv` (one row per chooser, method "
            "and query); `manifest.json` holds the inputs' sha256 (the choices tables, the BFCL data, the "
            "policy files) and the commit. The default policy's own table: "
            "[default-policy/](default-policy/README.md)."
        ),
        Paragraph(f"Generated by `{command}`; do not edit by hand."),
    ])  # fmt: skip


def write_pays_report(
    out: Path,
    rows: pd.DataFrame,
    methods: pd.DataFrame,
    paired: pd.DataFrame,
    about: dict[str, dict[str, Any]],
    tokenizer: dict[str, str],
    command: str,
    cap: int,
) -> None:
    """The tables (``per_query.csv``, ``methods.csv``, ``paired.csv``), the figure and the page into ``out``."""
    names = dict(zip(rows["chooser"], rows["chooser_name"], strict=True))
    for name, df in (("per_query", rows), ("methods", methods), ("paired", paired)):
        write_csv(df, out / f"{name}.csv")
    (out / "figures").mkdir(exist_ok=True)
    pays_figure(methods, names, out / "figures" / "pays.png")
    local_m, local_p = methods[methods["chooser"] == "local"], paired[paired["chooser"] == "local"]
    sim_m, sim_p = methods[methods["chooser"] == "simulated"], paired[paired["chooser"] == "simulated"]
    n = int(methods["n_queries"].iloc[0])
    page = Page(
        title=TITLE,
        group="tool search",
        lede="The tool search's default and recommended policies against the fixed limits tool searches ship with, "
        f"on BFCL's {n} test queries per scorer: does the chooser pick the right tool, and how many tokens of tool "
        "definitions does each request send?",
        answer=Section("", [
            Paragraph(f"**Answer** (chooser: {names['local']}; tool definitions counted with the chooser's own "
                      f"tokenizer, {tokenizer['model']}):"),
            Bullets([*best_lines(local_m), *versus_lines(local_p), tally(local_p),
                     accuracy_line(rows, "local", "this chooser")]),
            Figure("figures/pays.png", "end to end against tokens", "(tool tokens at the K shown, capped at 20)"),
        ]),
        sections=(
            *chooser_sections(local_m, local_p, names["local"]),
            Section(f"Sensitivity: the {SIMULATED}", [
                Paragraph(f"The same methods and queries with the answers of the {SIMULATED} (`choosers/simulated.py`,"
                          " fitted to the paper's Table 1): not evidence about any real model. " + tally(sim_p)),
                Bullets([*best_lines(sim_m), accuracy_line(rows, "simulated", "the simulated chooser")]),
            ], chooser_sections(sim_m, sim_p, label("simulated", names))),
            how_made(about, tokenizer, command, cap, methods),
        ),
    )  # fmt: skip
    write_page(out, page)


def log_how_made(
    about: dict[str, Any], tokenizer: dict[str, str], command: str, cap: int, methods: pd.DataFrame, n_judged: int
) -> Section:
    """How the numbers of a pays on your data were made: the requests and their split, the policies, the cap, what
    end to end and tokens are, the chooser, the intervals and the command."""
    r, d = about["recommended"], about["default"]
    skipped = "; ".join(f"{n} {why}" for why, n in (r.get("skipped") or {}).items())
    merged = int(r.get("duplicates_merged") or 0)
    trained = ", ".join(f"{b} {n}" for b, n in (d.get("trained_on") or {}).items()) or "the benchmarks'"
    capped = ", ".join(f"{x['method']} on {int(x['n_capped'])}" for _, x in methods.iterrows() if x["n_capped"])
    return Section("How these numbers were made", [
        Paragraph(
            f"`shortlist recommend` read {r['n_queries']} usable requests from your log"
            + (f" (skipped: {skipped})" if skipped else "")
            + (f" ({merged} repeated requests merged into their first)" if merged else "")
            + f" and split them, by query id, {r['n_train']} to train and {r['n_test']} to judge. This page judges "
            + (f"the first {n_judged} of those {r['n_test']} (`--limit`)" if n_judged < int(r["n_test"]) else
               f"those {n_judged}")
            + ": no policy was trained on them, and none was picked on them."
        ),
        Bullets([
            f"recommended: `{r['command']}` chose **{r['kind_chosen']}** by {r['selection']} of the training "
            f"requests and saved it as the searcher ({r['method']}).",
            f"default: the policy shipped for the scorer ({d['method']}), trained on {trained} benchmark queries, "
            "never on your log.",
            "Both searchers rank the whole registry for every judged request, and rank it the same (checked: the "
            "shortlists differ in K only).",
        ]),
        Paragraph(
            f"Every K is capped at {cap} (`--max-k`: the most tools shown, and asked about)"
            + (f"; a policy wanted more on {capped} of {n_judged} requests (column `K capped`)." if capped else
               "; no policy wanted more.")
        ),
        Paragraph(
            "End to end: a tool the agent called was among the top K and the chooser called it (when the agent "
            "called several, any of them counts; a top K holding none is a miss, asked nothing). The labels are "
            "your log's: a tool that would have served the request as well but was not the one called counts as "
            f"wrong. The chooser, {about['chooser']}, was asked {about['asked']} (request, K) shortlists "
            f"({answers(about.get('statuses') or {})}); {about['cached']} of them were answered from the choice cache "
            "(asked by an earlier run), and every answer is in `choices.csv`."
            + (" The simulated chooser is no LLM: it is handed the tools the agent called, and its error model "
               "decides whether it picks one." if about.get("simulated") else "")
            + " Tool-definition "
            "tokens: the shown tools' OpenAI `tools` array as the package's OpenAI chooser sends it, counted with the "
            f"local chooser's tokenizer, {tokenizer['model']} (tokenizer.json sha256 "
            f"`{tokenizer['tokenizer_json_sha256']}`), no special tokens: another model's tokenizer counts "
            "differently, and a provider wraps the array in its own template."
        ),
        Paragraph(
            "Intervals: 95% percentile bootstrap over the judged requests, the same resamples for every method, so "
            "each difference is paired; `higher` / `lower` when the interval excludes 0. Tables: `methods.csv`, "
            "`paired.csv`, `per_query.csv` (one row per method and request), `choices.csv` (every answer); "
            "`manifest.json` holds the inputs' sha256, the chooser's identity and the commit."
        ),
        Paragraph(f"Generated by `{command}`; do not edit by hand."),
    ])  # fmt: skip


def answers(statuses: dict[str, int]) -> str:
    """``61 called a listed tool, 9 refused``: a chooser's answers by status."""
    ok = statuses.get("ok", 0)
    rest = ", ".join(f"{n} {s}" for s, n in statuses.items() if s != "ok")
    return f"{ok} called a listed tool" + (f", {rest}" if rest else "")


def write_pays_log_report(
    out: Path,
    rows: pd.DataFrame,
    methods: pd.DataFrame,
    paired: pd.DataFrame,
    about: dict[str, Any],
    tokenizer: dict[str, str],
    command: str,
    cap: int,
    condition: str,
) -> None:
    """The tables (``per_query.csv``, ``methods.csv``, ``paired.csv``), the figure and the page of a pays on your
    data (:mod:`experiments.pays_log`: one chooser, one condition) into ``out``."""
    names = dict(zip(rows["chooser"], rows["chooser_name"], strict=True))
    (kind,) = names
    for name, df in (("per_query", rows), ("methods", methods), ("paired", paired)):
        write_csv(df, out / f"{name}.csv")
    (out / "figures").mkdir(exist_ok=True)
    pays_figure(methods, names, out / "figures" / "pays.png", "a called tool shown and chosen")
    n = int(methods["n_queries"].iloc[0])
    who = label(kind, names)
    page = Page(
        title=TITLE,
        group="tool search",
        lede=f"The tool search on your registry and your agent's log ({condition}): its recommended and default "
        f"policies against fixed limits on {n} held-out requests. Does the chooser pick a tool the agent called, and "
        "how many tokens of tool definitions does each request send?",
        answer=Section("", [
            Paragraph(f"**Answer** (chooser: {who}; {n} held-out requests; tool definitions counted with "
                      f"{tokenizer['model']}'s tokenizer):"),
            Bullets([*best_lines(methods, cap), *versus_lines(paired), tally(paired, "(adaptive policy, fixed limit)"),
                     accuracy_line(rows, kind, "this chooser", "a tool the agent called is", "one"),
                     *([f"Only {n} requests were judged (fewer than {FEW_REQUESTS}): the intervals are wide, and "
                        "\"within noise\" here is no evidence that two methods are the same. A longer log, or "
                        "`--limit` unset, narrows them."] if n < FEW_REQUESTS else [])]),
            Figure("figures/pays.png", "end to end against tokens", f"(tool tokens at the K shown, capped at {cap})"),
        ]),
        sections=(*chooser_sections(methods, paired, who, cap), log_how_made(about, tokenizer, command, cap, methods, n)),
    )  # fmt: skip
    write_page(out, page)
