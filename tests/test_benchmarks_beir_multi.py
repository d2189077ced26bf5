"""BEIR-layout data with several relevant documents per query through the condition path."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from agents.evaluation import score_depths_multi, summary_row_multi
from benchmarks.conditions import build_condition

DOCS = [
    ("d1", "Blood pressure", "Aerobic exercise lowers blood pressure."),
    ("d2", "Salt", "Salt intake raises blood pressure and hypertension risk."),
    ("d3", "Coffee", "Coffee intake and liver enzymes."),
    ("d4", "Statins", "Statins lower LDL cholesterol."),
    ("d5", "Sleep", "Short sleep raises blood pressure."),
    ("d6", "Liver", "Alcohol harms the liver."),
    ("d7", "Vitamin D", "Vitamin D and fracture risk."),
    ("d8", "Diet", "A Mediterranean diet lowers cholesterol."),
]
QUERIES = [
    ("q1", "what raises or lowers blood pressure"),
    ("q2", "what harms the liver"),
    ("q3", "how to lower cholesterol"),
    ("q4", "vitamin D fracture"),
]
QRELS = [("q1", "d1", 1), ("q1", "d2", 1), ("q1", "d5", 2), ("q2", "d3", 1), ("q2", "d6", 1), ("q3", "d4", 1),
         ("q3", "d8", 1), ("q3", "d7", 0), ("q4", "d7", 1)]  # fmt: skip


def _write(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "qrels").mkdir(exist_ok=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": t, "text": x}) + "\n" for d, t, x in DOCS), encoding="utf-8"
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": x}) + "\n" for q, x in QUERIES), encoding="utf-8"
    )
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{r}\n" for q, d, r in QRELS), encoding="utf-8"
    )
    return root


def test_beir_several_relevant_completeness(tmp_path: Path) -> None:
    folder = _write(tmp_path / "tiny")
    c = build_condition("beir", "bm25", options={"beir_dir": str(folder)}, cache_dir=tmp_path / "cache")
    assert [q.qid for q in c.queries] == ["q1", "q2", "q3", "q4"]
    assert [q.n_relevant for q in c.queries] == [3, 2, 2, 1]
    assert all(q.n_candidates == 8 for q in c.queries)
    doc_ids = [d for d, _, _ in DOCS]
    gold = {q: {d for qq, d, r in QRELS if qq == q and r > 0} for q, _ in QUERIES}
    for k in range(1, 9):
        rows = score_depths_multi(c.queries, np.full(4, k))
        for i, q in enumerate(c.queries):
            shown = {doc_ids[j] for j in c.ranked_tools[i][:k]}
            hits = len(shown & gold[q.qid])
            assert rows.loc[i, "hits"] == hits
            assert rows.loc[i, "found"] == int(hits > 0)
            assert rows.loc[i, "complete"] == int(hits == len(gold[q.qid]))
            r = len(gold[q.qid])
            want_pa = math.comb(8 - r, k - r) / math.comb(8, k) if k >= r else 0.0
            assert rows.loc[i, "p_random_all"] == pytest.approx(want_pa, rel=1e-12, abs=1e-15)
            want_reward = -math.log2(want_pa) if hits == r else 0.0
            assert rows.loc[i, "reward_all"] == pytest.approx(want_reward, rel=1e-12, abs=1e-15)
        s = summary_row_multi(rows)
        assert s["complete_pct"] == pytest.approx(100 * rows["complete"].mean())
        assert s["mean_r"] == 2.0
    full = score_depths_multi(c.queries, np.full(4, 8))
    assert full["complete"].tolist() == [1, 1, 1, 1]
    assert full["p_random_all"].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert summary_row_multi(full)["bor_bits_all"] == 0.0
