"""The pipeline graph's checks and the reuse key's parts and reasons, without running anything."""
from __future__ import annotations

import pytest

from mltrain.base.errors import ConfigError
from mltrain.pipelines import graph, reuse


def steps(**bodies):
    return {"steps": {name: {"overrides": ["job=command", "job.command=true"], **body} for name, body in bodies.items()}}


def test_parents_come_first_and_after_adds_an_edge(tmp_path):
    order = graph.parse(steps(score={"inputs": {"m": "train.outputs.model"}}, train={"outputs": ["model"],
                                                                                       "after": ["prep"]},
                              prep={}), str(tmp_path))
    assert [s.name for s in order] == ["prep", "train", "score"]
    assert order[2].parents == ["train"] and order[1].parents == ["prep"]
    assert graph.descendants(order, "prep") == ["train", "score"]


def test_a_cycle_is_named_step_by_step(tmp_path):
    with pytest.raises(ConfigError, match=r"^pipeline.steps: the steps form a cycle: a -> c -> b -> a$"):
        graph.parse(steps(a={"after": ["b"]}, b={"after": ["c"]}, c={"after": ["a"]}), str(tmp_path))


def test_external_inputs_are_absolute_and_their_hash_mode_is_checked(tmp_path):
    (tmp_path / "raw").mkdir()
    [s] = graph.parse(steps(a={"inputs": {"raw": {"path": "raw", "hash": "mtime"}}}), str(tmp_path))
    assert s.inputs["raw"].path == str(tmp_path / "raw") and s.inputs["raw"].hash == "mtime"
    with pytest.raises(ConfigError, match=r"hash: 'sha1' is not a hash mode \(allowed: content, mtime, none\)"):
        graph.parse(steps(a={"inputs": {"raw": {"path": "raw", "hash": "sha1"}}}), str(tmp_path))
    with pytest.raises(ConfigError, match="not a valid input name"):
        graph.parse(steps(a={"inputs": {"bad-name": "raw"}}), str(tmp_path))


def test_digest_follows_content_not_mtime_unless_asked(tmp_path):
    f = tmp_path / "d" / "x.txt"
    f.parent.mkdir()
    f.write_text("1 2")
    content, mtime = reuse.digest(f.parent), reuse.digest(f.parent, "mtime")
    st = f.stat()
    f.write_text("2 1")
    import os

    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert reuse.digest(f.parent) != content
    assert reuse.digest(f.parent, "mtime") == mtime  # the opt-out sees nothing: that is what it is for
    assert reuse.digest(f.parent, "none") == "none:" + str(f.parent)


def test_config_part_names_run_paths_and_leaves_out_where_it_runs():
    config = {"job": {"kind": "script", "arguments": ["--out", "/r/run1/outputs/m", "--in", "/r/up/outputs/d"],
                      "params": {"lr": 0.1}},
              "compute": {"kind": "slurm", "partition": "gpu"}, "run": {"id": "x"}, "inputs": {"d": "/r/up/outputs/d"}}
    part = reuse.config_part(config, {"/r/run1": "<run>", "/r/up/outputs/d": "<inputs.d>"})
    assert part == {"job.arguments": ["--out", "<run>/outputs/m", "--in", "<inputs.d>"], "job.kind": "script",
                    "job.params.lr": 0.1}


def test_reasons_say_what_changed():
    old = {"program": "script", "version": None, "source": {"train.py": "a", "util.py": "b"},
           "config": {"job.params.lr": 0.1, "job.arguments": ["--n", 3]}, "environment": "e1",
           "inputs": {"data": "content:1", "raw": "content:2"}, "outputs": ["model"]}
    new = {**old, "source": {"train.py": "c", "util.py": "b", "new.py": "d"},
           "config": {"job.params.lr": 0.2, "job.arguments": ["--n", 4]},
           "inputs": {"data": "pending:prepare:run7", "raw": "content:3"}}
    assert reuse.explain(old, new, limit=10) == [
        "source file new.py added", "source file train.py changed", "config job.arguments[1] 3 -> 4",
        "param lr 0.1 -> 0.2", "input data: upstream step prepare runs again", "input raw: content changed"]
    assert reuse.explain(old, dict(old)) == []
    assert reuse.key_of(old) == reuse.key_of(dict(old)) != reuse.key_of(new)
