"""Values for a section that the chosen job kind does not have.

A job kind owns the top-level sections its program reads (mltrain.jobspec.kinds.SECTIONS): a script or a
command job has no `trainer`. An override such as `trainer.epochs=2` still reaches such a job, as it did
when every job had every section: the command line of a pipeline reaches every step (a Convert to Image
Directory step as well as the training), and a sweep's script may read the value through an
interpolation. Hydra refuses a plain value for a key its config lacks, so for a job whose kind lacks the
section the value is added (`++trainer.epochs=2`): the job gets that section with the values it was
given, typed and checked by the validator. A job of a kind that has the section keeps the plain override,
which Hydra checks against the section's schema while composing.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

from mltrain.jobspec.kinds import JOB_KINDS, SECTIONS, JobKind

#: Mappings whose keys are the user's own (Slurm's and submitit's parameters, the rank's variables): a new key is
#: added there, not refused.
OPEN_MAPPINGS = ("compute.submitit", "compute.additional_parameters", "environment.environment_variables")


def open_mapping(arg: str) -> str:
    """`compute.submitit={comment: x}` or `compute.submitit.comment=x` as `++...`: Hydra's struct mode
    refuses a key new to a mapping unless forced, which would make the user write `+`/`++` for some
    keys and not others."""
    if arg.startswith("+") or "=" not in arg:
        return arg
    key = arg.split("=", 1)[0]
    if any(key == m or key.startswith(m + ".") for m in OPEN_MAPPINGS):
        return "++" + arg
    return arg


def open_sections(overrides: Sequence[str]) -> List[str]:
    """`overrides` with each value of a section the chosen kind lacks made an addition (`++`)."""
    kind = _chosen_kind(overrides)
    if kind is None:
        return list(overrides)
    lacking = [name for name in SECTIONS if name not in kind.sections]
    return ["++" + o if _value_of(o, lacking) else o for o in overrides]


def _chosen_kind(overrides: Sequence[str]) -> Optional[JobKind]:
    """The kind a plain `job=NAME` chooses; None without one (the primary config's kind, which has every
    section), for a sweep over kinds (each member is rewritten when composed) or for a preset of the user's
    own, whose sections only its composition tells."""
    chosen = None
    for override in overrides:
        key, sep, value = override.partition("=")
        if sep and key.strip() == "job":
            chosen = value.strip()
    return JOB_KINDS.get(chosen) if chosen is not None else None


def _value_of(override: str, sections: Sequence[str]) -> bool:
    if override.startswith(("+", "~")) or "=" not in override:
        return False
    key = override.split("=", 1)[0].strip()
    return "." in key and key.split(".", 1)[0] in sections
