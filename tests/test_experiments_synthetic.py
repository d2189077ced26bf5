"""The synthetic study's pure functions: grid, Bayes-fraction table, markdown and figures."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import experiments.report.synthetic_page as study
from benchmarks.synthetic import parse_variant
from experiments.report.page import section_lines
from experiments.report.synthetic_page import (
    DQN_SUBSET,
    SYNTHETIC_AXES,
    SYNTHETIC_GRID,
    bayes_fraction_table,
    synthetic_figures,
    synthetic_markdown,
)

C1 = "synthetic-gen-n100-sep2.0-normal"
C2 = "synthetic-gen-n100-sep0.5-normal"


def _rows(condition: str, method: str, seed: int, rewards: list[float], ks: list[int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "condition": condition,
            "method": method,
            "seed": seed,
            "qid": [f"q{i}" for i in range(len(rewards))],
            "reward_net": rewards,  # the judged quantity the fractions are of
            "reward": [r + 0.5 for r in rewards],  # the cost-free reward, reported beside
            "k": ks,
            "found": [int(r > 0) for r in rewards],
            "n": 100,
        }
    )


@pytest.fixture()
def per_query() -> pd.DataFrame:
    return pd.concat(
        [
            _rows(C1, "bayes", 0, [2.0, 4.0], [1, 3]),
            _rows(C1, "half", 0, [1.0, 2.0], [1, 100]),  # exactly half of Bayes on every query
            _rows(C1, "mixed", 0, [2.0, 0.0], [2, 4]),
            _rows(C1, "mixed", 1, [2.0, 2.0], [6, 8]),  # per-query seed means: [2, 1]
            _rows(C2, "bayes", 0, [1.0, 1.0, 1.0, 1.0], [5, 5, 5, 5]),
            _rows(C2, "half", 0, [1.0, 1.0, 1.0, 1.0], [10, 20, 30, 100]),
        ],
        ignore_index=True,
    )


def test_fraction_table_hand_computed(per_query: pd.DataFrame) -> None:
    t = bayes_fraction_table(per_query, n_boot=4000, seed=1).set_index(["condition", "method"])
    bayes = t.loc[(C1, "bayes")]
    assert (bayes["fraction"], bayes["fraction_lo"], bayes["fraction_hi"]) == (1.0, 1.0, 1.0)
    half = t.loc[(C1, "half")]
    assert half["fraction"] == pytest.approx(0.5)
    assert half["fraction_lo"] == pytest.approx(0.5) and half["fraction_hi"] == pytest.approx(0.5)  # paired resampling
    assert half["mean_reward_net"] == pytest.approx(1.5) and half["bayes_reward_net"] == pytest.approx(3.0)
    assert half["mean_reward"] == pytest.approx(2.0)
    assert half["whole_list_pct"] == pytest.approx(50.0)
    assert half["mean_k"] == pytest.approx(50.5) and half["median_k"] == pytest.approx(50.5)
    assert half["p90_k"] == pytest.approx(1 + 0.9 * 99)
    mixed = t.loc[(C1, "mixed")]
    # queries: (learner, bayes) = (2, 2) and (1, 4); resamples give 2/2 = 1, 3/6 = 0.5 or 2/8 = 0.25,
    # each end with probability 1/4, so the 2.5% and 97.5% quantiles are exactly 0.25 and 1
    assert mixed["fraction"] == pytest.approx(0.5)
    assert (mixed["fraction_lo"], mixed["fraction_hi"]) == (pytest.approx(0.25), pytest.approx(1.0))
    assert mixed["n_seeds"] == 2 and mixed["n_queries"] == 2
    assert mixed["mean_k"] == pytest.approx(5.0) and mixed["median_k"] == pytest.approx(5.0)
    assert mixed["found_pct"] == pytest.approx(75.0)
    assert t.loc[(C2, "half"), "fraction"] == pytest.approx(1.0)
    assert t.loc[(C2, "half"), "whole_list_pct"] == pytest.approx(25.0)
    # spec columns from the condition name
    assert t.loc[(C1, "half"), "separation"] == 2.0 and t.loc[(C2, "half"), "separation"] == 0.5
    assert t.loc[(C1, "half"), "distribution"] == "normal"


def test_fraction_table_is_seeded(per_query: pd.DataFrame) -> None:
    a = bayes_fraction_table(per_query, n_boot=200, seed=5)
    b = bayes_fraction_table(per_query, n_boot=200, seed=5)
    pd.testing.assert_frame_equal(a, b)
    only_c1 = bayes_fraction_table(per_query[per_query["condition"] == C1], n_boot=200, seed=5)
    pd.testing.assert_frame_equal(only_c1, a[a["condition"] == C1].reset_index(drop=True))


def test_fraction_table_rejects_bad_input(per_query: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="reward_net"):
        bayes_fraction_table(per_query.drop(columns=["reward_net"]))
    with pytest.raises(ValueError, match=C2):
        bayes_fraction_table(per_query[~((per_query["condition"] == C2) & (per_query["method"] == "bayes"))])
    odd = per_query.copy()
    odd.loc[(odd["method"] == "half") & (odd["condition"] == C1), "qid"] = ["q0", "q9"]
    with pytest.raises(ValueError, match="other queries"):
        bayes_fraction_table(odd)


def test_markdown_lists_fractions(per_query: pd.DataFrame) -> None:
    lines = section_lines(synthetic_markdown(bayes_fraction_table(per_query, n_boot=500)))
    text = "\n".join(lines)
    assert f"### {C1}" in text and f"### {C2}" in text
    assert "| half | 0.500 [0.500, 0.500] | 1.500 |" in text
    assert "| bayes | 1.000 [1.000, 1.000]" in text
    c1 = lines.index(f"### {C1}")
    assert lines[c1 + 4].startswith("| bayes |")  # Bayes first, then by fraction
    assert "(no synthetic results)" in "\n".join(section_lines(synthetic_markdown(pd.DataFrame())))


def test_figures_write_png_and_csv_of_the_plotted_numbers(per_query: pd.DataFrame, tmp_path: Path) -> None:
    table = bayes_fraction_table(per_query, n_boot=200)
    paths = synthetic_figures(table, tmp_path)
    names = sorted(p.name for p in paths)
    # both conditions lie on the difficulty axis; C1 (the base) also on the noise axis (noise 0)
    assert names == sorted(
        [
            "synthetic_difficulty.png",
            "synthetic_difficulty.csv",
            "synthetic_label_noise.png",
            "synthetic_label_noise.csv",
        ]
    )
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths)
    assert (tmp_path / "synthetic_difficulty.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    csv = pd.read_csv(tmp_path / "synthetic_difficulty.csv")
    assert set(csv["method"]) == {"half", "mixed"}  # the Bayes reference line is not a data series
    half = csv[csv["method"] == "half"].sort_values("x")
    assert half["x"].tolist() == [0.5, 2.0]
    assert half["fraction"].tolist() == pytest.approx([1.0, 0.5])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries left


def test_figures_train_axis_uses_log_x(tmp_path: Path) -> None:
    variant = SYNTHETIC_AXES["train"][1][2]
    rows = pd.concat(
        [
            _rows(f"synthetic-gen-{variant}", "bayes", 0, [2.0, 2.0], [1, 1]),
            _rows(f"synthetic-gen-{variant}", "tab", 0, [1.0, 2.0], [1, 1]),
        ]
    )
    paths = synthetic_figures(bayes_fraction_table(rows, n_boot=50), tmp_path)
    assert [p.name for p in paths] == ["synthetic_train_size.png", "synthetic_train_size.csv"]
    csv = pd.read_csv(paths[1])
    assert csv["x"].tolist() == [100] and csv["fraction"].tolist() == pytest.approx([0.75])


def test_grid_is_canonical_and_covers_the_axes() -> None:
    specs = [parse_variant(v) for v in SYNTHETIC_GRID]
    assert [s.variant for s in specs] == SYNTHETIC_GRID
    assert len(set(SYNTHETIC_GRID)) == len(SYNTHETIC_GRID) <= 20
    assert [parse_variant(v).separation for v in SYNTHETIC_AXES["difficulty"][1]] == [0.5, 1.0, 2.0, 3.0, 4.0]
    assert {parse_variant(v).distribution for v in SYNTHETIC_AXES["distractors"][1]} == {"normal", "student-t"}
    assert any(parse_variant(v).ties > 0 for v in SYNTHETIC_AXES["distractors"][1])
    trains = [parse_variant(v) for v in SYNTHETIC_AXES["train"][1]]
    assert [s.train for s in trains] == [25, 50, 100, 200, 400, 800]
    assert {s.n_queries - (s.train or 0) for s in trains} == {1000}  # fixed test size
    assert [parse_variant(v).noise for v in SYNTHETIC_AXES["noise"][1]] == [0.0, 0.1, 0.2, 0.3]
    assert set(DQN_SUBSET) <= set(SYNTHETIC_GRID) and len(DQN_SUBSET) < len(SYNTHETIC_GRID)
    for _, variants in SYNTHETIC_AXES.values():
        assert set(variants) <= set(SYNTHETIC_GRID)
    assert all(s.n == 100 for s in specs) and np.all([s.rho is None for s in specs])


def test_study_module_imports_only_the_plan_io_and_report_helpers() -> None:
    """The report module computes and renders; it never runs cells or parses arguments."""
    tree = ast.parse(Path(study.__file__).read_text())
    mods = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    mods += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    allowed = {"experiments.plan", "experiments.io", "experiments.figures", "experiments.report.markdown",
               "experiments.report.page", "experiments.report.tables"}  # fmt: skip
    assert not [m for m in mods if m.startswith("experiments") and m not in allowed]
