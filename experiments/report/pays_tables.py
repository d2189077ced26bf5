"""The tables of ``shortlist toolsearch pays`` (:func:`experiments.toolsearch.cmd_toolsearch_pays`), from the K
each method chose per query and the chooser's committed answers (DataFrames in, DataFrames out; no I/O).

Per query and method (:func:`pays_rows`): K is the policy's, capped at :data:`experiments.plan.MAX_K` (20, the
prefixes the chooser answered; ``capped`` counts the Ks cut); end to end = the chooser, shown the top K, picked the
gold tool (``correct`` of the committed choices at (condition, query, K); a top K without the gold is a miss; a top
K holding the gold without an answer is an error naming the query and K); tool-definition tokens = the tokens of
the shown tools' OpenAI ``tools`` array as the package's OpenAI chooser sends it
(:func:`choosers.openai_api.tools_json`), counted by the counter given (the command uses the local chooser's own
tokenizer; tests a fake one). Intervals (:func:`method_table`, :func:`paired_table`): 95% percentile bootstrap over
the queries with :func:`experiments.report.tables.query_resamples` and ``diff_interval``, the same resamples for every
method of a (chooser, condition), so every adaptive-minus-fixed difference is paired.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from experiments.plan import MAX_K

#: The adaptive methods, in the order the tables show them (every other method is a fixed limit).
ADAPTIVE = ("default", "recommended")
#: A token counter: the number of tokens of a text.
TokenCount = Callable[[str], int]


def token_counter(queries: dict[str, dict[str, Any]], count: TokenCount) -> Callable[[str, str, int], int]:
    """``tokens(condition, qid, k)``: the tokens (``count``) of the top ``k`` tools of that query in that
    condition's ranking, as the OpenAI ``tools`` array the package's OpenAI chooser sends
    (:func:`choosers.openai_api.tools_json`); each (condition, query, K) counted once."""
    from choosers.openai_api import tools_json

    memo: dict[tuple[str, str, int], int] = {}

    def tokens(condition: str, qid: str, k: int) -> int:
        key = (condition, qid, k)
        if key not in memo:
            memo[key] = int(count(tools_json(queries[condition][qid].ranked[:k])))
        return memo[key]

    return tokens


def pays_rows(
    depths: pd.DataFrame, choices: pd.DataFrame, tokens: Callable[[str, str, int], int], cap: int = MAX_K
) -> pd.DataFrame:
    """Per (condition, method, query) of ``depths`` (:func:`method_depths`): ``k`` (the policy's K capped at
    ``cap``), ``capped`` (the policy wanted more), ``presented`` (the gold among the top K), ``e2e`` (the chooser
    picked the gold from the top K: ``correct`` of ``choices`` at (condition, query, K); a top K without the gold
    is a miss), ``tokens`` (``tokens(condition, qid, K)``) and ``tokens_uncapped`` (those of the policy's own K:
    what the tool search would send without the cap).

    Raises:
        ValueError: a top K holding the gold has no answer in ``choices`` (naming the query and K:
            :func:`experiments.report.downstream_tables.outcome_rows`).
    """
    from experiments.report.downstream_tables import outcome_rows

    d = depths.assign(k=np.minimum(depths["policy_k"], cap), capped=(depths["policy_k"] > cap).astype(int), seed=0,
                      bucket="")  # fmt: skip
    d["found"] = ((d["gold_rank"] >= 1) & (d["k"] >= d["gold_rank"])).astype(int)
    out = outcome_rows(d, choices)  # a left merge: the rows of d, in order
    for col in ("scorer", "policy", "policy_k", "capped"):
        out[col] = d[col].to_numpy()
    keys = list(zip(out["condition"], out["qid"], strict=True))
    out["tokens"] = [tokens(c, q, int(k)) for (c, q), k in zip(keys, out["k"], strict=True)]
    out["tokens_uncapped"] = [tokens(c, q, int(k)) for (c, q), k in zip(keys, out["policy_k"], strict=True)]
    cols = ["condition", "scorer", "method", "policy", "qid", "gold_rank", "policy_k", "k", "capped", "presented",
            "e2e", "tokens", "tokens_uncapped"]  # fmt: skip
    return out[cols]


def method_table(rows: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """Per (chooser, condition, method): mean K (capped and the policy's own, and the largest), how many Ks were
    capped, presented %, end-to-end % and tool tokens per request (at the capped K, and at the policy's own), each
    mean with its 95% bootstrap interval over the queries (the same resamples for every method of a (chooser,
    condition))."""
    from experiments.report.tables import diff_interval, query_resamples

    out = []
    for (chooser, cond), g in rows.groupby(["chooser", "condition"], sort=False):
        idx = query_resamples(g["qid"].nunique(), n_boot, seed)
        for method, m in g.groupby("method", sort=False):
            m = m.sort_values("qid")
            if len(m) != idx.shape[1]:
                raise ValueError(f"{cond} {method}: {len(m)} queries, the condition has {idx.shape[1]}")
            e = diff_interval(100.0 * m["e2e"].to_numpy(dtype=np.float64), idx)
            t = diff_interval(m["tokens"].to_numpy(dtype=np.float64), idx)
            u = diff_interval(m["tokens_uncapped"].to_numpy(dtype=np.float64), idx)
            out.append({"chooser": chooser, "condition": cond, "method": method, "policy": m["policy"].iloc[0],
                        "n_queries": len(m), "mean_k": m["k"].mean(), "mean_policy_k": m["policy_k"].mean(),
                        "max_policy_k": int(m["policy_k"].max()), "n_capped": int(m["capped"].sum()),
                        "presented_pct": 100.0 * m["presented"].mean(),
                        "e2e_pct": e["diff"], "e2e_pct_lo": e["diff_lo"], "e2e_pct_hi": e["diff_hi"],
                        "tokens": t["diff"], "tokens_lo": t["diff_lo"], "tokens_hi": t["diff_hi"],
                        "tokens_uncapped": u["diff"], "tokens_uncapped_lo": u["diff_lo"],
                        "tokens_uncapped_hi": u["diff_hi"]})  # fmt: skip
    return pd.DataFrame(out)


def verdict(lo: float, hi: float, words: tuple[str, str] = ("higher", "lower")) -> str:
    """``words[0]`` / ``words[1]`` (higher / lower) when a paired 95% interval lies above / below 0, else
    ``within noise``."""
    return words[0] if lo > 0 else words[1] if hi < 0 else "within noise"


def paired_table(rows: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """Per (chooser, condition, adaptive method, fixed limit): end-to-end % and tool tokens per request (at the
    capped K, and at the policy's own) of the adaptive method minus the limit's, paired over the queries, with 95%
    bootstrap intervals and verdicts."""
    from experiments.report.tables import diff_interval, query_resamples

    out = []
    for (chooser, cond), g in rows.groupby(["chooser", "condition"], sort=False):
        e2e = g.pivot(index="qid", columns="method", values="e2e").astype(np.float64)
        tok = g.pivot(index="qid", columns="method", values="tokens").astype(np.float64)
        unc = g.pivot(index="qid", columns="method", values="tokens_uncapped").astype(np.float64)
        if e2e.isna().to_numpy().any():
            raise ValueError(f"{cond}: every method must be scored on the same queries")
        idx = query_resamples(len(e2e), n_boot, seed)
        methods = list(dict.fromkeys(g["method"]))
        for a in (m for m in methods if m in ADAPTIVE):
            for f in (m for m in methods if m not in ADAPTIVE):
                e = diff_interval(100.0 * (e2e[a] - e2e[f]).to_numpy(), idx)
                t = diff_interval((tok[a] - tok[f]).to_numpy(), idx)
                u = diff_interval((unc[a] - unc[f]).to_numpy(), idx)
                out.append({"chooser": chooser, "condition": cond, "method": a, "fixed": f, "n_queries": len(e2e),
                            "e2e_diff": e["diff"], "e2e_diff_lo": e["diff_lo"], "e2e_diff_hi": e["diff_hi"],
                            "e2e_verdict": verdict(e["diff_lo"], e["diff_hi"]), "tokens_diff": t["diff"],
                            "tokens_diff_lo": t["diff_lo"], "tokens_diff_hi": t["diff_hi"],
                            "tokens_verdict": verdict(t["diff_lo"], t["diff_hi"], ("more", "fewer")),
                            "tokens_uncapped_diff": u["diff"], "tokens_uncapped_diff_lo": u["diff_lo"],
                            "tokens_uncapped_diff_hi": u["diff_hi"],
                            "tokens_uncapped_verdict": verdict(u["diff_lo"], u["diff_hi"], ("more", "fewer"))})  # fmt: skip
    return pd.DataFrame(out)
