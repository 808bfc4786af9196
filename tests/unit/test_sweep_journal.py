"""A sweep's Optuna journal whose last append a full disk cut (chaos seed 14, its third pass): Optuna reads past the
torn line, but writes its next append onto it, after which the journal cannot be read, so `runs resume` of the
sweep failed with a JSONDecodeError for good. `mend_journal` drops the torn tail before the study is loaded."""
import json

import pytest

optuna = pytest.importorskip("optuna")

from optuna.storages import JournalStorage  # noqa: E402
from optuna.storages.journal import JournalFileBackend  # noqa: E402

from mltrain.sweeps.resume import mend_journal  # noqa: E402


def _study(path):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = JournalStorage(JournalFileBackend(str(path)))
    return optuna.create_study(storage=storage, study_name="s", load_if_exists=True, direction="maximize")


def _torn(tmp_path):
    path = tmp_path / "optuna.journal"
    study = _study(path)
    first = study.ask()
    study.tell(first, 1.0)
    study.ask()  # the member in flight when the disk filled
    whole = path.read_bytes()
    torn = json.dumps({"op_code": 6, "worker_id": "w", "trial_id": 1, "state": 1, "values": [2.0]})[:40]
    path.write_bytes(whole + torn.encode())  # the append the full disk cut: no newline
    return path, whole


def test_a_torn_append_breaks_the_journal_once_anything_is_appended_after_it(tmp_path):
    path, _ = _torn(tmp_path)
    study = _study(path)  # read past the torn line
    with pytest.raises(ValueError):  # json.JSONDecodeError is a ValueError
        study.ask()  # appended onto it, then read back
    with pytest.raises(ValueError):
        _study(path).get_trials()


def test_a_mended_journal_keeps_every_whole_append_and_goes_on(tmp_path):
    path, whole = _torn(tmp_path)
    mend_journal(path)
    assert path.read_bytes() == whole
    study = _study(path)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "RUNNING"]
    study.tell(study.ask(), 3.0)
    assert [t.state.name for t in _study(path).trials] == ["COMPLETE", "RUNNING", "COMPLETE"]


def test_a_whole_or_missing_journal_is_left_as_it_is(tmp_path):
    path = tmp_path / "optuna.journal"
    mend_journal(path)
    assert not path.exists()
    study = _study(path)
    study.tell(study.ask(), 1.0)
    before = path.read_bytes()
    mend_journal(path)
    assert path.read_bytes() == before
