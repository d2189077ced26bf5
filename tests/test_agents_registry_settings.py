"""Every registered kind's settings through ``--set`` (table-driven over the registry), and a toy kind
registered from outside the package running ``train``, ``evaluate`` and ``compare``: adding a kind needs
one ``register`` call and nothing in ``experiments/``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import TINY_BUDGETS
from numpy.typing import NDArray

from agents import registry
from agents.base import read_json, save_json
from envs import EpisodeConfig, RankedQuery
from experiments.cli import main
from experiments.options import LearnArgs

KIND_FIELDS = [(k, f.name) for k, kind in registry.KINDS.items() for f in fields(kind.config)]


@pytest.mark.parametrize(("kind", "key"), KIND_FIELDS, ids=[f"{k}.{f}" for k, f in KIND_FIELDS])
def test_every_setting_round_trips_through_set(kind: str, key: str) -> None:
    """``--set kind.key=value`` with the default's printed form gives the kind's defaults back; a
    changed value lands in that field only (the name field of fixed K is refused: it names the method)."""
    k = registry.get(kind)
    value = getattr(k.defaults, key)
    item = f"{kind}.{key}={registry.format_value(value)}"
    if key == k.name_field:
        with pytest.raises(ValueError, match=f"names the method.*--{key}"):
            LearnArgs(set=(item,))
        return
    assert LearnArgs(set=(item,)).settings_for() == {kind: k.defaults}
    changed = registry.changed_items(k, k.defaults)
    assert changed == []


@pytest.mark.parametrize("kind", list(registry.KINDS))
def test_unknown_setting_is_one_line_naming_kind_and_key(kind: str) -> None:
    with pytest.raises(ValueError) as err:
        LearnArgs(set=(f"{kind}.no_such_setting=1",))
    message = str(err.value)
    assert f"'{kind}'" in message and "'no_such_setting'" in message and "\n" not in message


def test_every_learned_kind_has_a_tiny_budget() -> None:
    """Every registered kind with a budget (the integer setting its training cost grows with) has a smaller one in
    the tests' shared :data:`TINY_BUDGETS`."""
    tiny = registry.parse_settings(TINY_BUDGETS)
    budgets = {name: kind for name, kind in registry.KINDS.items() if kind.budget}
    for name, kind in budgets.items():
        default = getattr(kind.defaults, kind.budget)
        assert name in tiny, f"{name} trains for {kind.budget}={default}: add a tiny one to TINY_BUDGETS"
        assert getattr(tiny[name], kind.budget) < default, name
    assert {"dqn", "tabular", "fqi", "ppo", "residual", "cutoff"} <= set(budgets)


def test_changed_settings_print_and_parse_back() -> None:
    """A non-default value is printed by ``changed_items`` and parsed back to the same settings."""
    dqn = registry.get("dqn")
    settings = registry.parse_settings(["dqn.net_arch=32,16", "dqn.double_q=true", "dqn.exploration_fraction=0.25"])
    items = registry.changed_items(dqn, settings["dqn"])
    assert sorted(items) == ["dqn.double_q=true", "dqn.exploration_fraction=0.25", "dqn.net_arch=32,16"]
    assert registry.parse_settings(items) == settings
    assert registry.parse_settings(["threshold.target=none"])["threshold"].target is None
    with pytest.raises(ValueError, match="'dqn'.*'n_envs'.*'x'"):
        registry.parse_settings(["dqn.n_envs=x"])
    with pytest.raises(ValueError, match="name the policy kind"):
        registry.parse_settings(["episodes=3"])
    assert registry.parse_settings(["episodes=3"], "tabular")["tabular"].episodes == 3


# ----------------------------------------------------------------------------- a toy kind from outside


@dataclass(frozen=True)
class ToyConfig:
    """Settings of the toy kind."""

    depth: int = 2
    """Depth shown when the top score clears the second by more than ``margin``; else twice that."""
    margin: float = 0.5
    """Score margin (raw score units)."""


class ToyPolicy:
    """Shows ``depth`` items after a clear top score, else ``2 * depth`` (a rule on raw scores)."""

    artifact = "agent.json"
    stochastic = False

    def __init__(self, settings: ToyConfig) -> None:
        self.settings = settings
        self.name = "toy"

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> ToyPolicy:
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        s = self.settings
        out = []
        for q in queries:
            clear = q.length == 1 or q.scores[0] - q.scores[1] > s.margin
            out.append(min(s.depth if clear else 2 * s.depth, config.cap(q)))
        return np.array(out, dtype=np.int64)

    def save(self, path: Path) -> None:
        save_json(path, self.name, {"depth": self.settings.depth, "margin": self.settings.margin})

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> ToyPolicy:
        p = read_json(path, "toy policy")
        return cls(ToyConfig(int(p["depth"]), float(p["margin"])))


@pytest.fixture
def toy_kind() -> Iterator[str]:
    registry.register(
        "toy",
        lambda reward, settings: ToyPolicy(settings),
        group="peer",
        stochastic=False,
        uses_reward=False,
        description="toy rule registered by a test",
        config=ToyConfig,
    )
    try:
        yield "toy"
    finally:
        del registry.KINDS["toy"]


def test_a_kind_registered_outside_experiments_trains_evaluates_and_compares(
    toy_kind: str, tmp_path: Path, shared_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = str(shared_cache)
    quiet = ["--cache-dir", cache, "--no-progress"]
    out = tmp_path / "train"
    assert main(["train", "--agent", toy_kind, "--set", "depth=3", "--seeds", "1", "--out", str(out), *quiet]) == 0
    run = out / "runs" / "bfcl-bm25__toy__s1"
    rows = pd.read_csv(run / "per_query.csv")
    assert set(rows["k"]) <= {3, 6} and rows["method"].eq("toy").all()
    evaluation = tmp_path / "evaluation"
    argv = ["evaluate", "--run-dir", str(run), "--scorer", "minilm", "--out", str(evaluation), "--cache-dir", cache]
    assert main(argv) == 0
    assert set(pd.read_csv(evaluation / "per_query.csv")["k"]) <= {3, 6}
    tiny = ["--set", *TINY_BUDGETS, "dqn.learning_starts=100", "toy.depth=4"]
    peers = tmp_path / "peers"
    compare = ["compare", "--only", "bfcl-bm25", "--seeds", "1", "--split-seeds", "0", "--max-depth", "20"]
    assert main([*compare, *tiny, "--out", str(peers), "--runs-dir", str(tmp_path / "runs"), *quiet]) == 0
    agg = pd.read_csv(peers / "aggregate.csv")
    toy = agg[agg["method"] == "toy"]
    assert len(toy) == 1 and toy["group"].iloc[0] == "peer"
    assert "`toy` (peer): toy rule registered by a test" in (peers / "README.md").read_text()


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "Infinity", "1_0", "1e999", "1.5.2", "0x10"])
def test_a_number_setting_must_be_finite_decimal_text(text: str) -> None:
    """``float()`` and ``int()`` accept infinity, NaN and ``1_0`` (as 10); a setting does not, and a
    run's settings file holding a non-finite number is refused too."""
    with pytest.raises(ValueError, match="'tabular'.*'lr_power'"):
        registry.parse_settings([f"tabular.lr_power={text}"])
    with pytest.raises(ValueError, match="'tabular'.*'episodes'"):
        registry.parse_settings([f"tabular.episodes={text}"])
    with pytest.raises(ValueError, match=r"config\.json: bad tabular settings \(lr_power=inf"):
        registry.get("tabular").from_dict({"lr_power": float("inf")}, "config.json")
    assert registry.parse_settings(["tabular.lr_power=2e-1"])["tabular"].lr_power == 0.2
    assert registry.parse_settings(["tabular.episodes=300"])["tabular"].episodes == 300


@dataclass(frozen=True)
class NoteConfig:
    """Settings of a kind with a free-text setting."""

    note: str = ""
    """Any text."""


def test_an_item_whose_value_reads_as_another_item_has_no_standard_form() -> None:
    """Only a string value can hold ``,<kind>.<key>=``; such an item would split in two in the text of a field of
    ``--set`` items, so :func:`agents.registry.normal_items` refuses it rather than print text that reads back
    otherwise."""
    registry.register("note", lambda reward, settings: ToyPolicy(ToyConfig()), group="peer", stochastic=False,
                      uses_reward=False, description="a test's kind", config=NoteConfig)  # fmt: skip
    try:
        assert registry.normal_items(["note.note=a,b", "note.note=c"]) == ("note.note=c",)
        with pytest.raises(ValueError, match="reads as another item"):
            registry.normal_items(["note.note=a,cutoff.epochs=3"])
    finally:
        del registry.KINDS["note"]


@pytest.mark.parametrize(
    ("kind", "key", "value"),
    [
        ("cutoff", "epochs", 3.5),
        ("cutoff", "epochs", True),
        ("cutoff", "epochs", "3"),
        ("cutoff", "epochs", None),
        ("cutoff", "lr", True),
        ("cutoff", "lr", "0.1"),
        ("cutoff", "break_even", 1),
        ("cutoff", "break_even", "true"),
        ("greedyk", "by", 1),
        ("threshold", "target", "0.9"),
        ("threshold", "target", False),
        ("dqn", "net_arch", 64),
        ("dqn", "net_arch", [64, 6.5]),
        ("dqn", "net_arch", [64, True]),
        ("topp", "temperatures", [0.5, False]),
        ("auto", "candidate_settings", "cutoff.epochs=3"),
        ("auto", "candidate_settings", ["cutoff.epochs=3", 3]),
    ],
)
def test_a_run_config_setting_of_the_wrong_type_is_refused(kind: str, key: str, value: Any) -> None:
    """A run's ``config.json`` setting is checked against its field's type (a bool is no number, a number no
    bool); the one-line error names the file, the kind and the key."""
    with pytest.raises(ValueError, match=rf"^run/config\.json: bad {kind} settings \({key}=") as err:
        registry.get(kind).from_dict({key: value}, "run/config.json")
    assert "\n" not in str(err.value)


def test_a_run_config_setting_of_the_right_type_is_read() -> None:
    """Ints, floats (an int too: JSON writes ``1.0`` as ``1`` in hand-made files), bools, strings, lists for
    tuples and null for an optional field."""
    cutoff = registry.get("cutoff").from_dict({"epochs": 3, "lr": 1, "break_even": False}, "c.json")
    assert (cutoff.epochs, cutoff.lr, cutoff.break_even) == (3, 1.0, False) and isinstance(cutoff.lr, float)
    assert registry.get("threshold").from_dict({"target": None}).target is None
    assert registry.get("threshold").from_dict({"target": 0.5}).target == 0.5
    assert registry.get("dqn").from_dict({"net_arch": [32, 16]}).net_arch == (32, 16)
    assert registry.get("topp").from_dict({"temperatures": [1, 0.5]}).temperatures == (1.0, 0.5)
    assert registry.get("greedyk").from_dict({"by": "bits"}).by == "bits"
