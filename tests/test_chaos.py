"""The fault-injection campaign's fixed seeds (issue 63), replayed in CI: each seed is one trial of
`benchmarks/chaos.py` (a scenario, a fault and its moment drawn from the seed; real processes and the test Slurm
cluster), and every invariant must hold after the user's recovery. The seeds that found a defect stay here as its
regression test (docs/faults.md, *The campaign*); the others cover every scenario at least once."""
from __future__ import annotations

import pytest
from chaos_campaign.trial import draw, run_trial
from slurm_support import require_cluster

#: seed -> why it is here. Each found a defect (the commit that fixed it is in docs/faults.md) or covers a scenario.
LOCAL_SEEDS = {
    1: "ddp_checkpoint, driver SIGKILL: 'runs resume' refused the run as Running (found)",
    3: "parallel_job, driver SIGKILL: the same (found)",
    10: "local_sweep, a member's rank SIGKILL",
    14: "local_pipeline, Ctrl-C",
    23: "endpoint, Ctrl-C during deploy (issue 63's defect)",
    5: "endpoint, a server SIGKILL, then endpoints restart",
}
SLURM_SEEDS = {
    7: "slurm_array_sweep, Ctrl-C then runs resume: the members' metrics were doubled (found)",
    17: "slurm_packed_sweep, scontrol requeue of a worker: the requeued worker was left queued (found)",
    25: "slurm_packed_sweep, driver SIGKILL then runs resume",
}


def _trial(seed: int, tmp_path) -> None:
    outcome = run_trial(seed, tmp_path, keep=True)
    assert not outcome.skipped, outcome.skipped
    print(f"\n{outcome.row()}  ({outcome.done})")
    assert outcome.held, "\n".join([outcome.row(), f"fault: {outcome.done}", *outcome.violations,
                                    f"kept: {outcome.folder}"])


@pytest.mark.parametrize("seed", sorted(LOCAL_SEEDS))
def test_a_local_seed_holds_every_invariant(seed, tmp_path, monkeypatch):
    assert draw(seed).scenario in {"local_sweep", "local_pipeline", "ddp_checkpoint", "parallel_job", "endpoint"}
    monkeypatch.delenv("MLTRAIN_HOME", raising=False)  # each trial has its own home
    _trial(seed, tmp_path)


@pytest.mark.parametrize("seed", sorted(SLURM_SEEDS))
def test_a_slurm_seed_holds_every_invariant(seed, tmp_path, monkeypatch):
    require_cluster()
    assert draw(seed).scenario.startswith("slurm_")
    monkeypatch.delenv("MLTRAIN_HOME", raising=False)
    _trial(seed, tmp_path)


def test_a_seed_draws_the_same_trial_everywhere():
    """The draw depends on the seed alone, never on the machine or the clusters here."""
    assert [draw(s) for s in range(1, 30)] == [draw(s) for s in range(1, 30)]
    assert draw(7).scenario == "slurm_array_sweep" and draw(7).fault == "sigint_foreground"
