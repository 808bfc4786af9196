"""Every use mltrain makes of Optuna's internals, in one place, with why; nothing else in mltrain touches a private
name of Optuna (tests/unit/test_fences.py holds that). Checked against optuna 5.1.0.

- `running_trial`: a resumed sweep (mltrain.sweeps.resume) takes over the trials its killed driver had asked
  for and not told. Optuna's public API hands out a `Trial` only from `study.ask()`, which makes a new trial;
  the study's own trial of that number is reached by its storage id (`FrozenTrial._trial_id`, no public
  reader) and `Trial(study, trial_id)`, as `Study.ask` builds it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from optuna.study import Study
    from optuna.trial import FrozenTrial, Trial

CHECKED_AGAINST = {"optuna": "5.1.0"}


def running_trial(study: Study, frozen: FrozenTrial) -> Trial:
    """The study's live `Trial` for a RUNNING `FrozenTrial` of it: what `study.ask()` returned for it."""
    from optuna.trial import Trial  # heavy

    return Trial(study, frozen._trial_id)
