"""Condition names: the one place that builds and parses ``<benchmark>-<scorer>[-<variant>]``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConditionId:
    """A condition's identity.

    Attributes:
        benchmark: ``bfcl``, ``metatool``, ``toolbench``, ``beir``, ``run`` (a user's TREC run), ...
        scorer: ``bm25``, ``minilm`` or a sentence-transformers model; ``run`` for user runs.
        variant: candidate-set variant (``top50``, ``full``, ``sub200``, ...; may contain ``-``);
            for user runs, the run file's stem.
    """

    benchmark: str
    scorer: str
    variant: str = ""

    def __post_init__(self) -> None:
        if not self.benchmark or "-" in self.benchmark:
            raise ValueError(f"benchmark name must be non-empty without '-', got {self.benchmark!r}")
        if not self.scorer:
            raise ValueError("scorer name must be non-empty")

    @property
    def name(self) -> str:
        """``bfcl-bm25``, ``metatool-minilm-top50``; ``run-<stem>`` for a user's run."""
        if self.benchmark == "run":
            return f"run-{self.variant}"
        return "-".join(p for p in (self.benchmark, self.scorer, self.variant) if p)

    @property
    def base(self) -> ConditionId:
        """The same benchmark and scorer without a variant."""
        return ConditionId(self.benchmark, self.scorer)

    @classmethod
    def parse(cls, name: str) -> ConditionId:
        """Inverse of :attr:`name` (the scorer must not contain ``-``)."""
        head, _, rest = name.partition("-")
        if head == "run" and rest:
            return cls("run", "run", rest)
        scorer, _, variant = rest.partition("-")
        if not head or not scorer:
            raise ValueError(f"bad condition name {name!r}: expected <benchmark>-<scorer>[-<variant>]")
        return cls(head, scorer, variant)

    def __str__(self) -> str:
        return self.name
