"""The fault-injection campaign in CI (issue 63): the trials that found a defect, kept as they were drawn (their
scenario, fault and moment; docs/faults.md names each defect and its fix), and seeds of the campaign that cover
the scenarios and faults those do not. Each is one trial of `benchmarks/chaos.py` on real processes and the test
Slurm cluster, and every invariant must hold after the user's recovery."""
from __future__ import annotations

import pytest
from chaos_campaign.trial import Draw, draw, run_trial
from slurm_support import require_cluster

#: MLflow's mirror kept on (the conftest turns it off for tests of other things): the store is an invariant too.
pytestmark = pytest.mark.tracking

#: The trials that found a defect (the seed of the campaign that drew them, with the catalogue of that day: 1 to 17
#: before full disks and lost nodes joined it, the others after).
FOUND = {
    "resume-after-kill-ddp": Draw(1, "ddp_checkpoint", "kill_driver", 4, 0.06),
    "resume-after-kill-parallel": Draw(3, "parallel_job", "kill_driver", 11, 0.27),
    "endpoint-orphan-worker": Draw(5, "endpoint", "kill_server", 0, 2.39),
    "sweep-full-disk-traceback": Draw(14, "local_sweep", "full_disk", 1, 0.27),
    "full-disk-left-a-run-folder": Draw(71, "ddp_checkpoint", "full_disk", 0, 0.13),
    "full-disk-step-thread-traceback": Draw(85, "local_pipeline", "full_disk", 0, 0.48),
    "ctrl-c-while-python-imports": Draw(94, "endpoint", "sigint_foreground", 0, 0.91),
    "canceled-as-its-rank-ended-well": Draw(149, "local_sweep", "sigterm_foreground", 3, 0.14),
}
FOUND_SLURM = {
    "metrics-doubled-on-resume": Draw(7, "slurm_array_sweep", "sigint_foreground", 3, 1.30),
    "requeued-packed-worker-left": Draw(17, "slurm_packed_sweep", "requeue", 2, 0.58),
    "resumed-packed-member-canceled-again": Draw(111, "slurm_packed_sweep", "sigint_foreground", 2, 0.99),
    "pipeline-step-never-made": Draw(217, "slurm_pipeline", "sigint_foreground", 0, 0.50),
}
#: Seeds of the campaign for what the trials above do not cover.
SEEDS = [8, 16, 25, 35, 79]  # pipeline's rank killed, DDP's rank killed, a parallel worker killed, Ctrl-C of a deploy, SIGTERM of a pipeline
SEEDS_SLURM = [2, 68]  # a Slurm pipeline's driver killed, a packed worker killed


def _trial(seed: int, tmp_path, fixed=None) -> None:
    outcome = run_trial(seed, tmp_path, keep=True, fixed=fixed)
    assert not outcome.skipped, outcome.skipped
    print(f"\n{outcome.row()}  ({outcome.done})")
    assert outcome.held, "\n".join([outcome.row(), f"fault: {outcome.done}", *outcome.violations,
                                    f"kept: {outcome.folder}"])


@pytest.mark.parametrize("name", sorted(FOUND))
def test_a_trial_that_found_a_defect_holds_every_invariant(name, tmp_path):
    _trial(FOUND[name].seed, tmp_path, FOUND[name])


@pytest.mark.parametrize("name", sorted(FOUND_SLURM))
def test_a_slurm_trial_that_found_a_defect_holds_every_invariant(name, tmp_path):
    require_cluster()
    _trial(FOUND_SLURM[name].seed, tmp_path, FOUND_SLURM[name])


@pytest.mark.parametrize("seed", SEEDS)
def test_a_seed_of_the_campaign_holds_every_invariant(seed, tmp_path):
    assert not draw(seed).scenario.startswith("slurm")
    _trial(seed, tmp_path)


@pytest.mark.parametrize("seed", SEEDS_SLURM)
def test_a_slurm_seed_of_the_campaign_holds_every_invariant(seed, tmp_path):
    require_cluster()
    assert draw(seed).scenario.startswith("slurm_")
    _trial(seed, tmp_path)


def test_a_seed_draws_its_trial_from_the_seed_alone():
    """The same seed draws the same trial in any process, on any machine, with or without the clusters."""
    assert draw(52) == Draw(52, "slurm2_node_loss", "lose_node", 7, 1.28)
    assert draw(14) == Draw(14, "local_sweep", "full_disk", 1, 0.27)
