"""The packing queue's dealing (mltrain.backends.slurm.pack): members are taken in the sweep's order, each by
one taker only, however many take at once; a member given back is taken again before later ones."""
import threading

from mltrain.backends.slurm.pack import claim, enqueue, entry_names, release


def test_members_are_dealt_in_order_one_taker_each(tmp_path):
    names = entry_names(5)
    enqueue(tmp_path, names, [f"/runs/m{i}" for i in range(5)])
    taken = [claim(tmp_path, owner) for owner in ("w1", "w2", "w1", "w2", "w1", "w2")]
    assert [t[1] if t else None for t in taken] == ["/runs/m0", "/runs/m1", "/runs/m2", "/runs/m3", "/runs/m4", None]
    assert sorted((tmp_path / "claimed").iterdir())[0].name == f"{names[0]}@w1"


def test_a_member_given_back_is_taken_again_before_later_ones(tmp_path):
    first, second = entry_names(1), entry_names(1)  # queued by two calls: the second's names sort after
    enqueue(tmp_path, first, ["/runs/a"])
    enqueue(tmp_path, second, ["/runs/b"])
    entry, run_dir = claim(tmp_path, "w1")
    assert run_dir == "/runs/a"
    release(tmp_path, entry, "w1", again=True)  # its worker was stopped under it
    assert claim(tmp_path, "w2") == (entry, "/runs/a")
    release(tmp_path, entry, "w2")
    assert (tmp_path / "done" / entry).read_text() == "/runs/a"


def test_many_takers_at_once_never_take_one_member_twice(tmp_path):
    enqueue(tmp_path, entry_names(300), [f"/runs/m{i}" for i in range(300)])
    got: dict = {}

    def take(owner: str) -> None:
        while (t := claim(tmp_path, owner)) is not None:
            got.setdefault(t[1], []).append(owner)

    threads = [threading.Thread(target=take, args=(f"w{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(f"/runs/m{i}" for i in range(300))
    assert all(len(owners) == 1 for owners in got.values())


def test_a_named_member_is_taken_only_if_still_queued(tmp_path):
    names = entry_names(2)
    enqueue(tmp_path, names, ["/runs/a", "/runs/b"])
    assert claim(tmp_path, "w1") == (names[0], "/runs/a")
    assert claim(tmp_path, "canceller", names[0]) is None  # a worker has it: its worker stops it
    assert claim(tmp_path, "canceller", names[1]) == (names[1], "/runs/b")


def test_the_workers_of_a_queue_start_where_its_first_driver_ran_also_when_a_later_one_submits(tmp_path, monkeypatch):
    from mltrain.backends.slurm.pack import worker_submission

    queue, first, later = tmp_path / "queue", tmp_path / "project", tmp_path / "elsewhere"
    for folder in (queue, first, later):
        folder.mkdir()
    params = {"timeout_min": 5, "slurm_additional_parameters": {"qos": "normal"}}
    monkeypatch.chdir(later)  # a dry run records nothing: its plan shows the folder it was run in
    assert worker_submission(queue, params, record=False)["slurm_additional_parameters"]["chdir"] == str(later)
    monkeypatch.chdir(first)  # the sweep's driver submits the first workers
    assert worker_submission(queue, params)["slurm_additional_parameters"] == {"qos": "normal", "chdir": str(first)}
    monkeypatch.chdir(later)  # `runs resume` from another folder submits more workers of the same queue
    assert worker_submission(queue, params)["slurm_additional_parameters"]["chdir"] == str(first)
    assert params["slurm_additional_parameters"] == {"qos": "normal"}  # the plan's own parameters are not changed


def test_the_pool_submits_workers_for_waiting_members_counting_those_slurm_holds():
    """The pool's decision (mltrain.backends.slurm.pack_pool), the same for a live driver and a resumed sweep:
    members waiting and under way, workers there (pending in Slurm included) -> workers to submit."""
    from mltrain.backends.slurm.pack_pool import COMING, parse_squeue, wanted

    assert wanted(size=2, todo=1, claimed=0, live=0) == 1  # issue 63: a member left queued, every worker gone
    assert wanted(size=2, todo=1, claimed=0, live=1) == 0  # a worker queued in Slurm will take it
    assert wanted(size=2, todo=5, claimed=0, live=0) == 2  # up to the pool's size
    assert wanted(size=2, todo=5, claimed=1, live=1) == 1
    assert wanted(size=3, todo=4, claimed=1, live=5) == 0  # more than enough (another driver's too)
    assert wanted(size=4, todo=1, claimed=2, live=1) == 1  # never more workers than members waiting
    assert wanted(size=2, todo=0, claimed=2, live=0) == 0  # none waits: a lost worker's member is the driver's
    # squeue's states of the queue's workers: pending, starting or running ones will take members
    states = parse_squeue("101|PENDING\n102|RUNNING\n103|COMPLETING\n104|CANCELLED\n105|CONFIGURING\n\n")
    assert [job for job, state in states.items() if state in COMING] == ["101", "102", "105"]



def test_a_sweep_is_queued_in_parts_first_enough_for_every_worker_twice():
    """Issue 66: the workers are asked for once the first part is queued, and start on it while the rest is."""
    from mltrain.backends.slurm.pack_driver import _parts

    parts = _parts(1000, 8)
    assert parts[0] == range(0, 16) and all(len(p) <= 64 for p in parts)
    assert [i for p in parts for i in p] == list(range(1000))
    assert _parts(5, 8) == [range(0, 5)] and _parts(40, 30)[0] == range(0, 40)
