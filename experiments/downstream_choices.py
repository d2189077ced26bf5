"""The chooser's answers for the downstream study: one choice per (query, K), every shortlist a prefix of
one ranking.

Every method's shortlist of a query is the top K of the same ranked list (the condition's scorer order,
the same tool descriptions and parameter schemas), so the study asks the chooser once per (query, K) and
every method reads the answer of its own K: :func:`choices_table`. The chooser's persistent cache
(:class:`choosers.ChoiceCache`) keeps every answer as it arrives, so an interrupted study resumes
and a rerun asks nothing.

Which (query, K) are asked: K in ``ks`` with the gold tool among the top K (``K >= gold rank``). A shortlist
without the gold cannot lead to a correct choice, so its choice is never needed: end-to-end success is
"presented and chosen"; a query whose gold is ranked beyond every K is asked nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from benchmarks.conditions import Condition
from choosers import BaseChooser, Tool, bfcl_tools, make_chooser

#: The columns of a choices table, in order (``runtime``, ``model`` and ``digest`` are the cache key of the
#: request, so a committed table can fill an empty cache: :func:`seed_cache`).
CHOICE_COLUMNS = ("qid", "k", "gold_rank", "status", "chosen_rank", "chosen_tool", "correct", "prompt_tokens",
                  "completion_tokens", "cached", "runtime", "model", "digest")  # fmt: skip


@dataclass(frozen=True)
class DownstreamQuery:
    """What the chooser sees of one query: its text and its ranked tools (with the gold's rank, 1-based; 0 when
    the gold is not in the list).

    A logged request may have several relevant tools (the agent called each): ``gold_ranks`` holds all their ranks
    (``gold_rank`` is the best of them, ``gold`` that tool), and picking any of them is correct. Empty: the one
    gold's.
    """

    qid: str
    text: str
    ranked: list[Tool]
    gold_rank: int
    gold: str
    gold_ranks: tuple[int, ...] = ()

    @property
    def relevant_ranks(self) -> tuple[int, ...]:
        """The ranks whose tool is a correct choice."""
        return self.gold_ranks or (self.gold_rank,)


def downstream_queries(cond: Condition, qids: Sequence[str], data_dir: Any = None, cache_dir: Any = None) -> list:
    """The :class:`DownstreamQuery` of each of ``qids`` on a BFCL condition (tools with BFCL's descriptions and
    parameter schemas, in the condition's ranking; each tool carries its score)."""
    from benchmarks.bfcl import load_bfcl

    if not cond.name.startswith("bfcl-") or not cond.ranked_tools:
        raise ValueError(f"{cond.name}: the downstream study needs a BFCL condition with its ranked tools")
    corpus = load_bfcl(data_dir=data_dir, cache_dir=cache_dir)
    text = {q.qid: q.text for q in corpus.queries}
    gold = {q.qid: q.gold[0] for q in corpus.queries}
    tools = bfcl_tools(data_dir=data_dir, cache_dir=cache_dir)
    at = {q.qid: i for i, q in enumerate(cond.queries)}
    out = []
    for qid in qids:
        if qid not in at:
            raise ValueError(f"{cond.name}: unknown query id {qid!r}")
        i = at[qid]
        q = cond.queries[i]
        ranked = [Tool(tools[j].name, tools[j].description, tools[j].parameters, float(s))
                  for j, s in zip(cond.ranked_tools[i], q.scores, strict=True)]  # fmt: skip
        out.append(DownstreamQuery(qid, text[qid], ranked, int(q.gold_rank), gold[qid]))
    return out


def chooser_for(name: str, queries: Sequence[DownstreamQuery], cache: Any = None, **options: Any) -> BaseChooser:
    """:func:`choosers.make_chooser`; the simulated chooser also gets each query's gold (its model
    of an LLM needs it; the real choosers never see it)."""
    if name == "simulated":
        options = {**options, "gold": {q.text: q.gold for q in queries}}
    return make_chooser(name, cache=cache, **options)


def choices_table(
    chooser: BaseChooser,
    queries: Sequence[DownstreamQuery],
    ks: Sequence[int] | Mapping[str, Sequence[int]],
    progress: bool = True,
) -> pd.DataFrame:
    """One row per asked (query, K) (module docstring; ``ks`` the same for every query, or by query id): the chosen
    tool's rank in the ranking (0 when it refused or named no listed tool), whether it is a gold (any of
    :attr:`DownstreamQuery.relevant_ranks`), its status and token counts."""
    from tqdm.auto import tqdm

    rows = []
    for q in tqdm(queries, desc=f"choices ({chooser.name})", disable=not progress, file=sys.stderr):
        mine = ks.get(q.qid, ()) if isinstance(ks, Mapping) else ks
        asked = [k for k in mine if 1 <= q.gold_rank <= k <= len(q.ranked)]
        if not asked:
            continue
        got = chooser.choose_prefixes(q.text, q.ranked[: max(asked)], asked)
        for k in asked:
            c = got[k]
            chosen = c.index + 1 if c.index is not None else 0
            rows.append({"qid": q.qid, "k": k, "gold_rank": q.gold_rank, "status": c.status, "chosen_rank": chosen,
                         "chosen_tool": c.name or "", "correct": int(chosen in q.relevant_ranks),
                         "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                         "cached": int(c.cached), "runtime": chooser.runtime_id, "model": chooser.model_id,
                         "digest": chooser.request_digest(q.text, q.ranked[:k])})  # fmt: skip
    return pd.DataFrame(rows, columns=list(CHOICE_COLUMNS))


def seed_cache(chooser: BaseChooser, table: pd.DataFrame, queries: Sequence[DownstreamQuery]) -> int:
    """Put every answer of a committed choices ``table`` that this chooser would ask for (same runtime, model
    and request digest) and its cache lacks into the cache; returns how many. A machine with an empty cache
    then renders the study from the committed table without asking the model again; a request that changed
    (another prompt, tool text or order) has another digest and is asked anew."""
    from choosers import Choice

    if chooser.cache is None or table.empty:
        return 0
    mine = table[(table["runtime"] == chooser.runtime_id) & (table["model"] == chooser.model_id)]
    by_qid = {q.qid: q for q in queries}
    added = 0
    for _, r in mine.iterrows():
        q = by_qid.get(str(r["qid"]))
        k = int(r["k"])
        if q is None or chooser.request_digest(q.text, q.ranked[:k]) != r["digest"]:
            continue
        key = chooser.cache.key(chooser.runtime_id, chooser.model_id, str(r["digest"]))
        if chooser.cache.get(key) is not None:
            continue
        index = int(r["chosen_rank"]) - 1 if r["status"] == "ok" else None
        name = str(r["chosen_tool"]) if isinstance(r["chosen_tool"], str) and r["chosen_tool"] else None
        choice = Choice(index, r["status"], name, prompt_tokens=int(r["prompt_tokens"]),
                        completion_tokens=int(r["completion_tokens"]))  # fmt: skip
        chooser.cache.put(key, choice, query=q.text, tools=[t.name for t in q.ranked[:k]], chooser=chooser.name)
        added += 1
    return added
