"""The public facade ``shortlist_depth``: one import name, light to import, that loads OUR packages
even from a folder holding an ``experiments/`` or ``envs/`` of its own, and trains a policy from Python."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest

import shortlist_depth as sd
from agents.base import FixedConfig

REPO = Path(__file__).resolve().parents[1]

#: The README's Python training example, exactly as given to the README (run as written below).
SNIPPET = """\
import numpy as np
import shortlist_depth as sd

# Your retriever's ranked lists, one RankedQuery per query: the scores sorted descending, and
# relevant_ranks the 1-BASED ranks of the relevant items in that order ([1]: the top item is relevant).
rng = np.random.default_rng(0)
queries = []
for i in range(300):
    gold = int(rng.integers(1, 6))  # here the relevant item sits at rank 1..5, just above a score gap
    scores = np.sort(rng.normal(size=50))[::-1]
    scores[:gold] += 3.0
    queries.append(sd.RankedQuery(scores, relevant_ranks=[gold], qid=f"q{i}"))
train, test = queries[:200], queries[200:]

policy = sd.fit("tabular", train, seed=0)  # any of sd.kinds(): "dqn", "cutoff", "gap", ...
print(policy.depth(test[0].scores))  # K for one list, from its scores alone
rows = sd.evaluate(policy, test)  # one row per query: k, found, p_random, reward, ...
print(rows["found"].mean(), rows["k"].mean(), sd.bor_aggregate(rows["found"], rows["k"], rows["n"], rows["r"]))
"""


def python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in ``cwd`` as a user runs it: the installed package, no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)


@pytest.fixture
def user_folder(tmp_path: Path) -> Path:
    """A folder with packages of its own named ``experiments`` and ``envs``; importing either fails loudly."""
    for name in ("experiments", "envs"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise RuntimeError('the user folder {name} was imported')\n")
    return tmp_path


def test_import_from_a_folder_with_its_own_experiments_and_envs(user_folder: Path) -> None:
    code = """
import json, sys
import shortlist_depth as sd
light = "torch" not in sys.modules
import experiments, envs
import gymnasium as gym
from shortlist_depth import load_policy
env = gym.make(sd.ENV_ID, queries=[sd.RankedQuery([0.9, 0.5, 0.1], relevant_ranks=[2], qid="q1")])
env.reset(seed=0)
print(json.dumps({"light": light, "version": sd.__version__, "p": sd.p_random(5, 370, 1), "env": sd.ENV_ID,
                  "experiments": experiments.__file__, "envs": envs.__file__, "kinds": sd.kinds(),
                  "load_policy": load_policy.__module__, "torch_now": "torch" in sys.modules}))
"""
    done = python(code, user_folder)
    assert done.returncode == 0, done.stderr + "\n(is the package installed? pip install -e .)"
    got = json.loads(done.stdout)
    assert got["light"], "importing shortlist_depth imported torch"
    assert got["version"] == version("shortlist-depth") and got["p"] == 5 / 370 and got["env"] == "ShortlistDepth-v0"
    home = Path(sd.__file__).resolve().parents[1]
    assert Path(got["experiments"]) == home / "experiments" / "__init__.py"
    assert Path(got["envs"]) == home / "envs" / "__init__.py"
    assert got["load_policy"] == "agents.trained" and "tabular" in got["kinds"]
    assert not got["torch_now"], "the environment and the facade imported torch though nothing here trains"
    plain = python("from experiments import load_policy", user_folder)  # why the facade exists
    assert plain.returncode != 0 and "the user folder experiments was imported" in plain.stderr


def test_an_unrelated_module_of_the_same_name_already_imported_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "__init__.py").write_text("MINE = 1\n")
    done = python("import experiments\nimport shortlist_depth", tmp_path)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: shortlist_depth: a module named 'experiments' is already imported from")
    assert str(tmp_path / "experiments") in last and "import shortlist_depth before it" in last


def test_readme_python_training_snippet_runs_in_such_a_folder(user_folder: Path) -> None:
    """The README's example trains a tabular policy on score lists built in Python (relevant_ranks 1-based)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    given = [b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "sd.fit(" in b]
    assert given == [SNIPPET], "the README's Python training example must be exactly this test's SNIPPET"
    done = python(SNIPPET, user_folder)
    assert done.returncode == 0, done.stderr
    k, summary = done.stdout.strip().splitlines()
    found, mean_k, bits = map(float, summary.split())
    assert 1 <= int(k) <= 50 and found > 0.8 and mean_k < 10 and bits > 2


# ---------------------------------------------------------------- in this process


def _queries(n: int = 60, seed: int = 0) -> list[sd.RankedQuery]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        gold = int(rng.integers(1, 4))
        scores = np.sort(rng.normal(size=20))[::-1]
        scores[:gold] += 3.0
        out.append(sd.RankedQuery(scores, relevant_ranks=[gold], qid=f"q{i}"))
    return out


def test_every_public_name_resolves_and_our_packages_need_no_redirect_here() -> None:
    for name in sd.__all__:
        assert getattr(sd, name) is not None, name
    assert set(sd.__all__) <= set(dir(sd))
    assert sd.bind_own_packages() == []  # in the test suite sys.path already finds this checkout
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        sd.nope  # noqa: B018


def test_fit_and_evaluate_from_python() -> None:
    train, test = _queries(seed=0), _queries(seed=1)
    fixed = sd.fit("fixed", train, settings=FixedConfig(3))
    assert fixed.method == "fixed-3" and fixed.run_dir is None
    assert fixed.depths([q.scores for q in test]).tolist() == [3] * len(test)
    rows = sd.evaluate(fixed, test)
    assert rows["k"].tolist() == [3] * len(test) and rows["found"].tolist() == [1] * len(test)
    assert sd.bor_aggregate(rows["found"], rows["k"], rows["n"], rows["r"]) == pytest.approx(np.log2(20 / 3))
    gap = sd.fit("gap", train, seed=1)
    assert sd.evaluate(gap, test)["found"].mean() > 0.9
    assert sd.evaluate(gap.policy, test, gap.episode).equals(sd.evaluate(gap, test))
    assert sd.make("fixed", settings=FixedConfig(2)).depths(test[:2], sd.EpisodeConfig()).tolist() == [2, 2]
    with pytest.raises(ValueError, match="applies only to"):
        sd.fit("bayes", train)
    with pytest.raises(ValueError, match="unknown policy"):
        sd.fit("nope", train)


# ---------------------------------------------------------------- two entry points, one policy


#: Each RL kind with a tiny budget (its settings as ``--set`` items): trained through both entry points below.
RL_BUDGETS = {
    "dqn": ("total_timesteps=1500", "learning_starts=200"),
    "fqi": ("gradient_steps=200", "target_update_interval=50"),
    "ppo": ("total_timesteps=512", "n_steps=64", "batch_size=64", "n_epochs=2"),
}


@pytest.mark.parametrize("kind", sorted(RL_BUDGETS))
def test_fit_and_shortlist_train_give_the_same_policy(tmp_path: Path, kind: str) -> None:
    """One cell of each RL kind trained through ``shortlist train`` (a TREC run + qrels, the CLI's defaults) and
    through ``sd.fit`` on the same training queries, seed and settings: the same episode settings (step cost 0.01,
    gamma 1: the judged net reward, :class:`envs.EpisodeConfig`'s defaults are the plan's), the same objective
    recorded, the same network weights bit for bit, the same depths. Then the fitted policy saved with ``.save``
    loads back through ``load_policy`` unchanged."""
    import torch
    from test_experiments_own_run import write_run

    from agents import registry
    from agents.base import judged_objective
    from experiments.cli import main
    from experiments.runner import get_condition

    run, qrels = write_run(tmp_path / "data", seed=3, n_queries=60)
    budget = ["--set", *(f"{kind}.{item}" for item in RL_BUDGETS[kind])]
    argv = ["train", "--run", str(run), "--qrels", str(qrels), "--agent", kind, "--seeds", "5", *budget]
    assert main([*argv, "--no-progress", "--out", str(tmp_path / "out")]) == 0
    (run_dir,) = (tmp_path / "out" / "runs").iterdir()
    cli = sd.load_policy(run_dir)

    options = (("qrels", str(qrels)), ("run", str(run)))
    cond = get_condition("run", "run", "", 0, None, None, tuple(sorted(options)))
    settings = registry.parse_settings([f"{kind}.{item}" for item in RL_BUDGETS[kind]])[kind]
    fitted = sd.fit(kind, cond.train, settings=settings, seed=5)

    assert fitted.episode == cli.episode and fitted.episode.gamma == 1.0 and fitted.episode.step_cost == 0.01
    judged = judged_objective(fitted.episode)
    assert cli.config["objective"] == {"target": "net", "reward": "bor", "step_cost": 0.01, "gamma": 1.0}
    assert registry.get(kind).objective("bor", settings, fitted.episode) == judged
    ours, theirs = fitted.policy.model.policy.state_dict(), cli.policy.model.policy.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    lists = [q.scores for q in cond.test]
    np.testing.assert_array_equal(fitted.depths(lists), cli.depths(lists))

    saved = sd.load_policy(fitted.save(tmp_path / "mine"))
    np.testing.assert_array_equal(saved.depths(lists), fitted.depths(lists))
    assert (
        saved.method == f"bor-{kind}"
        and saved.episode == fitted.episode
        and saved.config["source"] == "shortlist_depth.fit"
    )
    with pytest.raises(FileExistsError, match="not empty"):
        fitted.save(tmp_path / "mine")
