"""The backend contract is narrow and written down: the methods a backend may override are these 15 (17 before
issue 50's item 6; `take_back` came with the resume of a packed member no worker took, `fetch` with remote clusters), `docs/architecture.md`
names each where it says how to add a backend, and the built-in backends override nothing else (a new hook is a change to this list, the docs and this test together)."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

from mltrain import backends
from mltrain.backends.base import Backend

REPO = Path(__file__).resolve().parents[2]
# required: check (the one refusal of a config, and the process group), plan, launch, refresh, cancel
CONTRACT = {"check", "wrap_ranks", "validate", "preflight", "plan", "describe", "launch", "submit", "refresh",
            "cancel", "locate", "after", "concurrency", "take_back", "fetch"}


def _hooks(cls: type) -> set:
    return {name for name, value in vars(cls).items() if not name.startswith("_") and inspect.isfunction(value)}


def test_the_backend_contract_is_these_methods_and_no_more():
    assert _hooks(Backend) == CONTRACT
    assert {name for name in Backend.__abstractmethods__} == {"check", "plan", "launch", "refresh", "cancel"}


def test_built_in_backends_override_only_the_contract():
    for name in backends.BACKENDS:
        cls = type(backends.get(name))
        extra = {hook for klass in cls.__mro__[:-1] if klass not in (Backend, object) and issubclass(klass, Backend)
                 for hook in _hooks(klass)} - CONTRACT
        assert not extra, f"{cls.__name__} has public methods outside the backend contract: {sorted(extra)}"


def test_the_architecture_guide_names_every_hook():
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text[text.index("**A backend**"):text.index("**A job kind**")]
    named = set(re.findall(r"`([a-z_]+)`", section))
    assert CONTRACT <= named, f"docs/architecture.md does not name {sorted(CONTRACT - named)}"
    assert not named & {"follow", "log_path", "job_env", "argv_prefix", "gpus_per_node"}, "a removed hook is named"
