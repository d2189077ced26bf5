"""The paper's reported figures (SPEC section 6), for side-by-side tables. Never used in training."""

from __future__ import annotations

from typing import Any

#: condition -> method -> (found %, mean K); +- where the paper gave 3 seeds.
PAPER: dict[str, dict[str, Any]] = {
    "bfcl-bm25": {
        "n_queries": 400,
        "bor": {"found_pct": 90.3, "found_sd": 2.4, "mean_k": 7.4, "k_sd": 2.5},
        "f1": {"found_pct": 88.9, "found_sd": 1.4, "mean_k": 6.4, "k_sd": 1.9},
        "best_fixed": {"found_pct": 90.8, "k": 50},
        "found_at_1": 60.0,
        "found_at_5": 82.5,
    },
    "bfcl-minilm": {
        "n_queries": 400,
        "bor": {"found_pct": 85.0, "found_sd": 3.0, "mean_k": 1.4, "k_sd": 0.1},
        "f1": {"found_pct": 85.8, "found_sd": 1.4, "mean_k": 1.6, "k_sd": 0.1},
        "best_fixed": {"found_pct": 97.5, "k": 5},
        "found_at_1": 73.2,
    },
    "metatool-bm25": {
        "n_queries": 2000,
        "bor": {"found_pct": 96.2, "mean_k": 80.7},
        "f1": {"found_pct": 82.8, "mean_k": 57.2},
        "best_fixed": {"found_pct": 83.7, "k": 50},
        "found_at_1": 33.0,
    },
    "metatool-minilm": {
        "n_queries": 2000,
        "bor": {"found_pct": 73.3, "mean_k": 2.3},
        "f1": {"found_pct": 69.0, "mean_k": 3.0},
        "best_fixed": {"found_pct": 74.7, "k": 3},
        "found_at_1": 60.0,
    },
    "metatool-bge": {
        "n_queries": 2000,
        "bor": {"found_pct": 71.4, "mean_k": 2.4},
        "f1": {"found_pct": 61.4, "mean_k": 1.2},
        "best_fixed": {"found_pct": 57.2, "k": 1},
        "found_at_1": 57.0,
    },
    "metatool-minilm-top20": {
        "n_queries": 1200,
        "found_at_1": 59.2,  # the paper's fixed K=1 on the N-sweep
        "bor": {"found_pct": 70.6, "mean_k": 1.6},
        "f1": {"found_pct": 63.3, "mean_k": 1.3},
        "best_fixed": {"found_pct": 59.2, "k": 1},
    },
    "metatool-minilm-top50": {
        "n_queries": 1200,
        "found_at_1": 59.2,  # the paper's fixed K=1 on the N-sweep
        "buckets": {"easy": (1.58, 100.0), "medium": (3.72, 79.3), "hard": (4.24, 26.5)},
        "bor": {"found_pct": 74.7, "mean_k": 2.6},
        "f1": {"found_pct": 63.9, "mean_k": 1.2},
        "best_fixed": {"found_pct": 59.2, "k": 1},
    },
    "metatool-minilm-top100": {
        "n_queries": 1200,
        "found_at_1": 59.2,  # the paper's fixed K=1 on the N-sweep
        "bor": {"found_pct": 72.8, "mean_k": 2.1},
        "f1": {"found_pct": 63.3, "mean_k": 1.5},
        "best_fixed": {"found_pct": 59.2, "k": 1},
    },
    "toolbench-minilm": {
        "n_queries": 2000,
        "bor": {"found_pct": 61.9, "found_sd": 0.6, "mean_k": 4.4, "k_sd": 0.4},
        "f1": {"found_pct": 47.6, "found_sd": 1.3, "mean_k": 1.5, "k_sd": 0.3},
        "best_fixed": {"found_pct": 77.3, "k": 20},
        "found_at_1": 45.3,  # the paper's fixed K=1
        "fixed_5": 64.7,
        "buckets": {  # BoR agent per bucket: (mean K, found %)
            "easy": (2.5, 100.0),
            "medium": (4.8, 74.4),
            "hard": (5.7, 16.7),
            "very hard": (6.9, 0.2),
        },
    },
}
