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
    break_even_depth,
    constant_reward,
    expected_random_hits,
    f1_reward,
    p_random,
    terminal_reward,
)
from rewards.completeness import (
    SUCCESS_KINDS,
    bor_aggregate_all,
    bor_aggregate_success,
    bor_ceiling_all,
    bor_reward_all,
    bor_reward_success,
    completeness_at_k,
    hits_at_k,
    p_random_all,
    p_random_success,
)

__all__ = [
    "COLLAPSE_LAMBDA",
    "REWARD_KINDS",
    "SUCCESS_KINDS",
    "bor_aggregate",
    "break_even_depth",
    "bor_aggregate_all",
    "bor_aggregate_success",
    "bor_ceiling",
    "bor_ceiling_all",
    "bor_optimistic",
    "bor_reward",
    "bor_reward_all",
    "bor_reward_success",
    "completeness_at_k",
    "constant_reward",
    "expected_random_hits",
    "f1_reward",
    "hits_at_k",
    "p_random",
    "p_random_all",
    "p_random_success",
    "terminal_reward",
]
