"""Registry of every depth-policy kind: learned agents, fixed K, practitioners' peers and limits.

One :class:`PolicyKind` per kind holds everything the rest of the package needs to know
about it: its group, whether its result depends on the seed, its settings dataclass and
default settings, how to build it untrained and how to load a trained one from the file it
saved. The runner, the CLI (``shortlist train --agent X --set key=value`` / ``evaluate``),
the comparison and the reports read this table; none of them switch on kind names. Adding a
policy is one :func:`register` call beside its class, in ``agents/``.

Settings: every kind has one frozen settings dataclass (a field per setting, a docstring per
field, validated in ``__post_init__``; :class:`NoSettings` when there is nothing to set), and
its default instance. ``key=value`` strings (the CLI's ``--set``, ``tune --grid``) are parsed
against that dataclass by :func:`parse_settings`: an unknown key or a bad value is one
ValueError naming the kind and the key.

Method names: ``<kind>-<value>`` for a kind whose settings field names the method
(:attr:`PolicyKind.name_field`; fixed K: ``fixed-5``), ``<reward>-<kind>`` for kinds trained
towards a reward (``bor-dqn``), else the kind's name (``gap``).
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

from agents.base import NOT_FITTED, DepthPolicy, FixedConfig, FixedK, Objective
from envs.features import EXAMINED_ONLY_SETS

Group = Literal["agent", "peer", "baseline", "limit"]
View = Literal["none", "stepwise", "list"]
VIEWS: tuple[View, ...] = ("none", "stepwise", "list")
"""What a kind's choice of depth reads of a query's scores (:attr:`PolicyKind.view`)."""
GROUPS: tuple[Group, ...] = ("agent", "peer", "baseline", "limit")
"""Report order of the groups: learned agents, practitioners' peers, fixed K, limits (read labels
or solve a model)."""


@dataclass(frozen=True)
class NoSettings:
    """Settings of a kind with nothing to set (its behaviour is fixed by its definition)."""


@dataclass(frozen=True)
class PolicyKind:
    """A registered depth-policy kind.

    Attributes:
        name: kind name (``dqn``, ``tabular``, ``fixed``, ``gap``, ...); no ``_`` and no ``.``.
        group: ``agent`` (learned policy), ``peer`` (heuristic or supervised method
            practitioners use), ``baseline`` (fixed K) or ``limit`` (oracle, exact optimum).
        stochastic: whether the result depends on the seed (then it runs on every seed).
        uses_reward: whether it is trained towards a reward (its method name then starts with it).
        description: one line for reports and ``--help``.
        build: ``build(reward, settings)`` -> an untrained policy; ``settings`` is an instance
            of ``config`` (never None: :meth:`make` fills in ``defaults``).
        config: the settings dataclass (frozen; :class:`NoSettings` when there is nothing to set).
        defaults: the kind's default settings, an instance of ``config`` (kinds sharing a
            dataclass differ here, e.g. the gap rule's tail and buffer variants).
        name_field: the settings field that is part of the method name (fixed K: ``k``, so
            ``fixed-5``); empty for every other kind.
        only_benchmarks: the benchmarks the kind applies to (empty: every benchmark), e.g. a
            limit that needs a known generator.
        reads_labels: whether its depths read the labels (the hindsight oracle): then it is a
            reference, never a policy to apply to unlabelled lists.
        observes: whether it reads an observation set of :mod:`envs.features` (the episode's
            ``observation``): only then does a named set (``--observation strict``) change its
            cell and tag its method (``bor-dqn@strict``); a rule on the raw scores is the same
            policy under every set.
        objective: ``objective(reward, settings, episode)`` -> what the kind fits or trains towards
            (:class:`agents.base.Objective`), recorded in every run's config and checked against the
            judged objective (:func:`agents.base.judged_objective`).
        budget: the integer setting its training cost grows with (DQN's ``total_timesteps``, tabular Q's
            ``episodes``, the torch models' ``epochs``); empty when fitting costs about the same whatever
            the settings. ``shortlist bench`` times a fraction of it and extrapolates.
        torch_at_inference: whether choosing a depth runs torch (a torch network: DQN, the cut-off, the
            Choppy-style model), so that loading the policy imports torch; the others decide with numpy
            (``auto``: the kind it chose). A tool search that must start fast serves the others
            (tests/test_toolsearch.py loads each in a process where torch cannot be imported).
        view: what its choice of depth reads of a query's scores. ``none``: no score (fixed K, the best
            fixed K on train, a random depth). ``stepwise``: at depth k the observation of depths 1..k only,
            and it shows the items at its first STOP (the RL agents, the DP of the tabular model), so on an
            examined-items-only set (``strict``) it reads nothing of the items below the depth it shows.
            ``list`` (the default): scores beyond the depth it shows, whatever the set (the gap, threshold
            and top-p rules normalise or search over the list; the cut-off and Choppy-style models read every
            depth's features before they choose; the posterior model reads the list; the residual DQN reads
            the posterior's belief). :func:`reads_examined_only` joins it with the observation set.
        shares_fit: the kind whose fitted network it reuses when a study runs both on the same training queries,
            settings and seed (the P(found) stop: ``cutoff``, whose network it is): the fit is stored once
            (:mod:`agents.memo`), :func:`experiments.runner.run_cells` runs these cells after every other, and
            ``shortlist bench`` times the fit with that kind's network stored. Empty for every other kind.
        min_train: the fewest training queries it fits on (``auto`` and the residual DQN hold some out: 2); a
            command refuses a smaller training split of a user's data before it runs
            (:func:`experiments.pipeline.check_training_size`).
    """

    name: str
    group: Group
    stochastic: bool
    uses_reward: bool
    description: str
    build: Callable[[str, Any], DepthPolicy]
    config: type
    defaults: Any
    name_field: str = ""
    only_benchmarks: tuple[str, ...] = ()
    reads_labels: bool = False
    observes: bool = False
    objective: Callable[[str, Any, Any], Objective] = lambda reward, settings, episode: NOT_FITTED
    budget: str = ""
    torch_at_inference: bool = False
    view: View = "list"
    shares_fit: str = ""
    min_train: int = 1

    @property
    def summary(self) -> str:
        """The description's first clause: one line for ``--help``."""
        return self.description.split(" (")[0].split(";")[0].split(", ")[0]

    def applies_to(self, benchmark: str) -> bool:
        """Whether the kind can run on ``benchmark``."""
        return not self.only_benchmarks or benchmark in self.only_benchmarks

    def settings(self, settings: Any = None) -> Any:
        """``settings`` checked to be this kind's dataclass, or the kind's defaults when None."""
        if settings is None:
            return self.defaults
        if not isinstance(settings, self.config):
            raise TypeError(f"{self.name}: settings must be a {self.config.__name__}, got {type(settings).__name__}")
        return settings

    def make(self, reward: str = "bor", settings: Any = None) -> DepthPolicy:
        """An untrained policy (``settings`` defaults to :attr:`defaults`)."""
        return self.build(reward, self.settings(settings))

    def load(self, path: Path, reward: str = "bor", settings: Any = None) -> DepthPolicy:
        """A trained policy from the file it saved (``path`` = run dir / artifact)."""
        policy = self.make(reward, settings)
        return type(policy).load(Path(path), reward, self.settings(settings))

    def from_dict(self, values: Mapping[str, Any], where: str = "") -> Any:
        """Settings from a plain mapping (a run's ``config.json``), over the defaults; ValueError naming
        ``where``, the kind and the key on an unknown key or a bad value. Each value is checked against its field's
        type (:func:`_typed`: no bool for a number, no number for a bool); JSON lists become tuples, ints in a
        float field floats."""
        known = {f.name for f in fields(self.config)}
        unknown = sorted(set(values) - known)
        at = f"{where}: " if where else ""
        if unknown:
            raise ValueError(f"{at}policy kind {self.name!r} has no setting {unknown[0]!r}{_known(self)}")
        plain = {}
        for key, value in values.items():
            try:
                plain[key] = _typed(_field_type(self, key), value)
            except ValueError as e:
                raise ValueError(f"{at}bad {self.name} settings ({key}={value!r}: {e})") from e
        try:
            return replace(self.defaults, **plain)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{at}bad {self.name} settings ({e})") from e


KINDS: dict[str, PolicyKind] = {}


def register(
    name: str,
    build: Callable[[str, Any], DepthPolicy],
    *,
    group: Group,
    stochastic: bool,
    uses_reward: bool,
    description: str,
    config: type = NoSettings,
    defaults: Any = None,
    name_field: str = "",
    only_benchmarks: tuple[str, ...] = (),
    reads_labels: bool = False,
    observes: bool = False,
    objective: Callable[[str, Any, Any], Objective] | None = None,
    budget: str = "",
    torch_at_inference: bool = False,
    view: View = "list",
    shares_fit: str = "",
    min_train: int = 1,
) -> PolicyKind:
    """Add a kind to :data:`KINDS` (names are unique and contain no ``_`` or ``.``).

    ``config`` is the kind's settings dataclass (frozen), ``defaults`` its default instance
    (default: ``config()``); ``objective`` what it fits (default: nothing, a fixed rule).
    """
    if not name or "_" in name or "." in name or name in KINDS:
        raise ValueError(f"invalid or duplicate policy kind name {name!r}")
    if group not in GROUPS:
        raise ValueError(f"policy kind {name!r}: group must be one of {GROUPS}, got {group!r}")
    if view not in VIEWS:
        raise ValueError(f"policy kind {name!r}: view must be one of {VIEWS}, got {view!r}")
    if shares_fit and shares_fit not in KINDS:
        raise ValueError(f"policy kind {name!r}: shares_fit names no registered kind: {shares_fit!r}")
    if min_train < 1:
        raise ValueError(f"policy kind {name!r}: min_train must be at least 1, got {min_train}")
    if view == "stepwise" and not observes:
        raise ValueError(f"policy kind {name!r}: a stepwise kind reads an observation set (observes=True)")
    if not (dataclasses.is_dataclass(config) and isinstance(config, type)):
        raise TypeError(f"policy kind {name!r}: config must be a dataclass, got {config!r}")
    defaults = config() if defaults is None else defaults
    if not isinstance(defaults, config):
        raise TypeError(f"policy kind {name!r}: defaults must be a {config.__name__}")
    for what, value in (("name_field", name_field), ("budget", budget)):
        if value and value not in {f.name for f in fields(config)}:
            raise ValueError(f"policy kind {name!r}: {what} {value!r} is not a field of {config.__name__}")
    kind = PolicyKind(
        name,
        group,
        stochastic,
        uses_reward,
        description,
        build,
        config,
        defaults,
        name_field,
        only_benchmarks,
        reads_labels,
        observes,
        objective or (lambda reward, settings, episode: NOT_FITTED),
        budget,
        torch_at_inference,
        view,
        shares_fit,
        min_train,
    )
    KINDS[name] = kind
    return kind


def get(name: str) -> PolicyKind:
    """The registered kind ``name``; ValueError listing the registered ones otherwise."""
    if name not in KINDS:
        raise ValueError(f"unknown policy {name!r}; registered: {', '.join(KINDS) or 'none'}")
    return KINDS[name]


def reads_examined_only(kind: PolicyKind, observation: str) -> bool:
    """Whether the kind's depths read nothing of the items below the depth it shows when its observation set is
    ``observation``: it reads no score (``view`` ``none``), or it is ``stepwise`` on an examined-items-only set
    (:data:`envs.features.EXAMINED_ONLY_SETS`)."""
    return kind.view == "none" or (kind.view == "stepwise" and observation in EXAMINED_ONLY_SETS)


def make(name: str, reward: str = "bor", settings: Any = None) -> DepthPolicy:
    """Instantiate a registered kind (untrained)."""
    return get(name).make(reward, settings)


def kinds(group: Group | None = None) -> list[str]:
    """Registered kind names (of one group), in registration order."""
    return [k for k, v in KINDS.items() if group is None or v.group == group]


# ----------------------------------------------------------------------------- key=value settings


def _known(kind: PolicyKind) -> str:
    names = [f.name for f in fields(kind.config)]
    return f"; its settings: {', '.join(names)}" if names else "; it has no settings"


def _field_type(kind: PolicyKind, key: str) -> Any:
    hints = typing.get_type_hints(kind.config)
    if key not in hints:
        raise ValueError(f"policy kind {kind.name!r} has no setting {key!r}{_known(kind)}")
    return hints[key]


SETTING_ITEMS = "setting_items"
"""Field metadata key (``field(metadata={SETTING_ITEMS: True})``): the field, a ``tuple[str, ...]``, holds ``--set``
items ``kind.key=value`` (``auto``'s ``candidate_settings``). An item's value may hold commas
(``topp.temperatures=0.5,1.0``), so the field's text is split only at a comma that starts the next item
(:func:`split_items`), never at every comma: :func:`format_value` and :func:`parse_value` round-trip it."""

_ITEM_START = re.compile(r",(?=\s*[^\s,=._]+\.[A-Za-z_][A-Za-z0-9_]*\s*=)")
"""A comma followed by ``kind.key=`` (a kind name holds no ``_`` or ``.``, a key is an identifier): where one item
of a :data:`SETTING_ITEMS` field ends and the next begins. No number, bool or ``none`` holds ``=``, so only a
string value could hold such a comma; :func:`normal_items` refuses one."""


def split_items(text: str) -> list[str]:
    """The ``kind.key=value`` items of the text of a :data:`SETTING_ITEMS` field (their values may hold commas):
    ``"topp.temperatures=0.5,1.0,cutoff.epochs=3"`` -> ``["topp.temperatures=0.5,1.0", "cutoff.epochs=3"]``."""
    return [part.strip() for part in _ITEM_START.split(text) if part.strip()]


_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _scalar(typ: Any, text: str) -> Any:
    if typ is bool:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"expected true or false, got {text!r}")
        return text.lower() == "true"
    if typ is int:
        if not _INT.fullmatch(text):
            raise ValueError("expected a whole number in decimal digits")
        return int(text)
    if typ is float:
        if not _FLOAT.fullmatch(text):
            raise ValueError("expected a finite decimal number (e.g. 0.5, 3, 1e-3); NaN and infinity are not settings")
        value = float(text)
        if not math.isfinite(value):
            raise ValueError("the number overflows a float")
        return value
    if typ is str:
        return text
    raise ValueError(f"settings of type {typ} cannot be given as text")


_EXPECTED = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}


def _typed(typ: Any, value: Any) -> Any:
    """``value`` read from JSON, checked against the settings field type ``typ`` (ValueError saying what was
    expected): an int field takes an int, a float field an int or a finite float (as a float), neither a bool; a
    bool field a bool; a str field a str; a tuple field a list or tuple, each item checked; an optional field None."""
    args = typing.get_args(typ)
    if typing.get_origin(typ) in (typing.Union, types.UnionType) and type(None) in args:
        if value is None:
            return None
        typ = next(a for a in args if a is not type(None))
        args = typing.get_args(typ)
    if typing.get_origin(typ) is tuple:
        if not isinstance(value, list | tuple):
            raise ValueError("expected a list")
        return tuple(_typed(args[0], v) for v in value)
    if typ not in _EXPECTED:
        raise ValueError(f"settings of type {typ} cannot be read")
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if typ is float and number:
        try:
            if math.isfinite(value):
                return float(value)
        except OverflowError:  # an int too large for a float
            pass
        raise ValueError("expected a finite number; NaN and infinity are not settings")
    if (typ is int and number and isinstance(value, int)) or (typ in (bool, str) and isinstance(value, typ)):
        return value
    raise ValueError(f"expected {_EXPECTED[typ]}")


def parse_value(kind: PolicyKind, key: str, text: str) -> Any:
    """One setting's value from text, typed from the kind's settings dataclass.

    Booleans are ``true``/``false``; an optional field takes ``none``; a tuple field takes
    comma-separated items (``net_arch=64,64``), a :data:`SETTING_ITEMS` field ``--set`` items split where the
    next one starts (:func:`split_items`).
    """
    typ = _field_type(kind, key)
    holds_items = next(f for f in fields(kind.config) if f.name == key).metadata.get(SETTING_ITEMS, False)
    if key == kind.name_field:
        raise ValueError(
            f"policy kind {kind.name!r}: {key!r} names the method ({kind.name}-<{key}>); give it with --{key}"
        )
    args = typing.get_args(typ)
    try:
        if typing.get_origin(typ) in (typing.Union, types.UnionType) and type(None) in args:
            if text.lower() == "none":
                return None
            typ = next(a for a in args if a is not type(None))
            args = typing.get_args(typ)
        if typing.get_origin(typ) is tuple:
            parts = split_items(text) if holds_items else text.split(",")
            return tuple(_scalar(args[0], item.strip()) for item in parts if item.strip())
        return _scalar(typ, text)
    except ValueError as e:
        raise ValueError(f"policy kind {kind.name!r}, setting {key!r}: bad value {text!r} ({e})") from e


def format_value(value: Any) -> str:
    """The text :func:`parse_value` reads back as ``value`` (floats by ``repr``, so they round-trip; a tuple's items
    joined by commas, which a :data:`SETTING_ITEMS` field splits back where each item starts)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(format_value(v) for v in value)
    return repr(value) if isinstance(value, float) else str(value)


def changed_items(kind: PolicyKind, settings: Any) -> list[str]:
    """``kind.key=value`` for every setting of ``settings`` that differs from the kind's defaults (its
    name field excluded): the ``--set`` items that rebuild ``settings``."""
    settings = kind.settings(settings)
    return [
        f"{kind.name}.{f.name}={format_value(getattr(settings, f.name))}"
        for f in fields(kind.config)
        if f.name != kind.name_field and getattr(settings, f.name) != getattr(kind.defaults, f.name)
    ]


def split_item(item: str) -> tuple[str, str, str]:
    """``[kind.]key=value`` -> (kind or "", key, value); ValueError when there is no ``=``."""
    lhs, sep, value = item.partition("=")
    if not sep or not lhs.strip():
        raise ValueError(f"bad setting {item!r}: expected [kind.]key=value, e.g. dqn.total_timesteps=5000")
    kind, dot, key = lhs.strip().rpartition(".")
    return (kind if dot else ""), key, value.strip()


def parse_settings(items: Iterable[str], default_kind: str | None = None) -> dict[str, Any]:
    """``--set`` items -> {kind name: settings instance over its defaults}.

    Each item is ``kind.key=value``, or ``key=value`` for ``default_kind`` (the command's
    ``--agent``). Unknown kinds, keys and bad values are one ValueError naming the kind and key;
    a setting the dataclass rejects (its ``__post_init__``) is reported the same way.
    """
    by_kind: dict[str, dict[str, Any]] = {}
    for item in items:
        kind_name, key, text = split_item(item)
        if not kind_name:
            if default_kind is None:
                raise ValueError(f"bad setting {item!r}: name the policy kind, e.g. dqn.{key}={text}")
            kind_name = default_kind
        kind = get(kind_name)
        by_kind.setdefault(kind.name, {})[key] = parse_value(kind, key, text)
    out = {}
    for name, values in by_kind.items():
        kind = get(name)
        try:
            out[name] = replace(kind.defaults, **values)
        except (TypeError, ValueError) as e:
            raise ValueError(f"policy kind {name!r}: bad settings {values} ({e})") from e
    return out


def normal_items(items: Iterable[str]) -> tuple[str, ...]:
    """``--set`` items (each naming its kind) in their one standard form, so that equal settings are equal tuples
    (and equal config hashes): one item per changed (kind, key), the last given winning, none equal to the kind's
    default, kinds by name and keys in the field order of the kind's settings, values in :func:`format_value`'s text
    (:func:`changed_items`). ValueError as :func:`parse_settings`, or when an item's value would read as the start
    of another item in a :data:`SETTING_ITEMS` field's text."""
    settings = parse_settings(items)
    out = tuple(item for name in sorted(settings) for item in changed_items(get(name), settings[name]))
    for item in out:
        if len(split_items(item)) != 1:
            raise ValueError(f"bad setting {item!r}: its value holds ',<kind>.<key>=', which reads as another item")
    return out


register(
    "fixed",
    lambda reward, settings: FixedK(settings.k),
    group="baseline",
    stochastic=False,
    uses_reward=False,
    description="always the top K",
    config=FixedConfig,
    name_field="k",
    view="none",
)
