"""Pure math on counts and arrays: Bits-over-Random, its random baseline and the RL rewards.

No environment state, no global RNG, no I/O.
"""

from rewards.bor import (
    COLLAPSE_LAMBDA,
    REWARD_KINDS,
    bor_aggregate,
    bor_ceiling,
    bor_optimistic,
    bor_reward,
    constant_reward,
    expected_random_hits,
    f1_reward,
    p_random,
    terminal_reward,
)

__all__ = [
    "COLLAPSE_LAMBDA",
    "REWARD_KINDS",
    "bor_aggregate",
    "bor_ceiling",
    "bor_optimistic",
    "bor_reward",
    "constant_reward",
    "expected_random_hits",
    "f1_reward",
    "p_random",
    "terminal_reward",
]
