"""Azure's parallel job (issue 52): an entry script's init()/run(mini_batch) over files or table rows, in worker
processes on each instance, mini-batches retried and counted, rows appended in input order. Real processes
throughout: the agents, their workers, a worker killed mid-batch, v2 files alone and as a pipeline node."""
from __future__ import annotations

import csv
import json
import subprocess
import textwrap
from pathlib import Path

from support import leftovers, metric_rows, mltrain_exe, only_run, pid_alive, run_mltrain, runs, until

#: Each item leaves a mark of its own (O_EXCL: a second run of the same item fails loudly), then a row.
ONCE = """\
import os, time
def init():
    global marks
    marks = os.environ["MARKS"]
def run(mini_batch):
    rows = []
    for path in mini_batch:
        time.sleep(0.05)  # enough work that both instances take some
        name = os.path.basename(path)
        os.close(os.open(os.path.join(marks, f"{name}.{os.getpid()}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        rows.append(f"{name} {open(path).read().strip()}")
    return rows
"""

#: Fails for good on items 10 and 20; the worker that first meets item 7 is killed (SIGKILL) mid-batch; item 13
#: gets no row (Azure counts it as a failed item).
FLAKY = """\
import os, signal
def run(mini_batch):
    out = []
    for path in mini_batch:
        n = int(open(path).read())
        if n in (10, 20):
            raise ValueError(f"bad item {n}")
        if n == 7 and not os.path.exists(os.environ["KILLED"]):
            open(os.environ["KILLED"], "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        if n != 13:
            out.append(str(n))
    return out
"""


def _files(folder: Path, count: int, text=lambda i: f"item {i}") -> Path:
    folder.mkdir(parents=True)
    for i in range(1, count + 1):
        (folder / f"f{i:03d}.txt").write_text(text(i))
    return folder


def _parallel(project: Path, script: str, data: Path, *extra: str, env: dict | None = None, timeout: float = 120):
    (project / "score.py").write_text(script)
    return run_mltrain("job=parallel", f"job.source_directory={project}", "job.entry_script=score.py",
                       f"job.input_data={data}", *extra, cwd=project, env=env, timeout=timeout)


def test_every_file_is_scored_once_by_two_instances_of_two_workers_and_rows_keep_input_order(home, project, tmp_path):
    data = _files(tmp_path / "data", 50)
    marks = tmp_path / "marks"
    marks.mkdir()
    r = _parallel(project, ONCE, data, "job.mini_batch_size=3", "job.max_concurrency_per_instance=2",
                  "distribution.node_count=2", f"+environment.environment_variables.MARKS={marks}")
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    assert run["status"] == "Completed" and len(run["ranks"]) == 2
    rows = (Path(run["dir"]) / "outputs" / "parallel_run_step.txt").read_text().splitlines()
    assert rows == [f"f{i:03d}.txt item {i}" for i in range(1, 51)]
    items = sorted(m.name.split(".txt.")[0] for m in marks.iterdir())
    assert items == [f"f{i:03d}" for i in range(1, 51)]  # each once
    holders = {c.read_text().rsplit(":", 1)[1] for c in (Path(run["dir"]) / "parallel" / "claims").iterdir()}
    assert holders == {"0", "1"}  # both instances took mini-batches
    workers = sorted(p.name for p in (Path(run["dir"]) / "logs" / "user" / "stdout").rglob("process*.stdout.txt"))
    assert workers == ["process000.stdout.txt", "process001.stdout.txt", "process002.stdout.txt",
                       "process003.stdout.txt"]
    last = {m["name"]: m["value"] for m in metric_rows(run["dir"])}
    assert last["mini_batches_total"] == 17 and last["mini_batches_done"] == 17 and last["mini_batches_failed"] == 0
    assert "parallel job succeeded: 17 of 17 mini-batches done" in r.out


def test_failed_mini_batches_are_retried_then_counted_and_the_threshold_decides(home, project, tmp_path):
    data = _files(tmp_path / "data", 24, text=str)
    env: dict = {}
    common = ("job.mini_batch_size=2", "job.max_concurrency_per_instance=2", "job.max_retries=1",
              f"+environment.environment_variables.KILLED={tmp_path / 'killed'}")
    r = _parallel(project, FLAKY, data, *common, "job.mini_batch_error_threshold=2", env=env)
    assert r.rc == 0, r.out + r.err
    run = runs(home)[-1]
    rows = (Path(run["dir"]) / "outputs" / "parallel_run_step.txt").read_text().split()
    # batches (9,10) and (19,20) failed twice each and were given up; 7's worker was killed once, then it ran
    assert rows == [str(n) for n in range(1, 25) if n not in (9, 10, 13, 19, 20)]
    assert (tmp_path / "killed").exists()
    attempts = json.loads((Path(run["dir"]) / "parallel" / "failed" / "4.json").read_text())["errors"]
    assert attempts == ["ValueError: bad item 10", "ValueError: bad item 10"]
    errors = (Path(run["dir"]) / "logs" / "user" / "error.txt").read_text()
    assert "mini-batch 4 (f009.txt and 1 more): ValueError: bad item 10" in errors and "bad item 20" in errors
    assert "2 failed, 5 items failed" in r.out  # 4 items of the given-up batches, and 13
    shown = run_mltrain("runs", "show", run["id"], cwd=project).out
    assert "parallel:  parallel job succeeded: 10 of 12 mini-batches done, 2 failed, 5 items failed" in shown
    assert "  mini-batch 9 (f019.txt and 1 more): ValueError: bad item 20 | ValueError: bad item 20" in shown
    (tmp_path / "killed").unlink()
    r = _parallel(project, FLAKY, data, *common, "job.mini_batch_error_threshold=1", env=env)
    assert r.rc != 0
    assert "error: parallel job: 2 mini-batches failed, more than mini_batch_error_threshold 1" in r.out + r.err
    assert runs(home)[-1]["status"] == "Failed"
    r = _parallel(project, FLAKY, data, *common, "job.error_threshold=4", env=env)
    assert r.rc != 0 and "items failed, more than error_threshold 4" in r.out + r.err, r.out + r.err


def test_a_mini_batch_past_its_timeout_is_killed_and_run_again(home, project, tmp_path):
    data = _files(tmp_path / "data", 4)
    slow = textwrap.dedent("""\
        import os, time
        def run(mini_batch):
            flag = os.environ["SLEPT"]
            if any(p.endswith("f003.txt") for p in mini_batch) and not os.path.exists(flag):
                open(flag, "w").close()
                time.sleep(60)
            return [os.path.basename(p) for p in mini_batch]
        """)
    r = _parallel(project, slow, data, "job.mini_batch_size=1", "job.timeout=2", "job.max_retries=1",
                  f"+environment.environment_variables.SLEPT={tmp_path / 'slept'}")
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    assert (Path(run["dir"]) / "outputs" / "parallel_run_step.txt").read_text().split() == \
        ["f001.txt", "f002.txt", "f003.txt", "f004.txt"]
    attempts = json.loads((Path(run["dir"]) / "parallel" / "attempts" / "2.json").read_text())
    assert attempts == ["timed out after 2 s (retry_settings.timeout); worker process000 killed"]


def test_a_v2_parallel_job_file_scores_an_mltable_as_dataframes_on_two_instances(home, tmp_path):
    job = tmp_path / "job"
    (job / "tbl").mkdir(parents=True)
    (job / "tbl" / "iris.csv").write_text("a,b,c\n" + "".join(f"{i},{i * 2},{i % 3}\n" for i in range(400)))
    (job / "tbl" / "MLTable").write_text("paths:\n  - file: ./iris.csv\ntransformations:\n  - read_delimited:\n"
                                         "      delimiter: ','\n      encoding: utf8\n"
                                         "      header: all_files_same_headers\n")
    (job / "src").mkdir()
    (job / "src" / "predict.py").write_text(textwrap.dedent("""\
        import argparse
        def init():
            global scale
            parser = argparse.ArgumentParser(allow_abbrev=False)
            parser.add_argument("--scale", type=int)
            scale = parser.parse_known_args()[0].scale
        def run(input_data):
            out = input_data[["a"]].copy()
            out["pred"] = input_data["b"] * scale
            return out
        """))
    (job / "job.yml").write_text(textwrap.dedent("""\
        $schema: https://azuremlschemas.azureedge.net/latest/parallelJob.schema.json
        type: parallel
        inputs:
          input_data: {type: mltable, path: ./tbl, mode: direct}
          scale: 3
        outputs:
          job_output_file: {type: uri_file, mode: rw_mount}
        input_data: ${{inputs.input_data}}
        mini_batch_size: "1kb"
        resources: {instance_count: 2}
        max_concurrency_per_instance: 2
        error_threshold: 5
        retry_settings: {max_retries: 2, timeout: 60}
        task:
          type: run_function
          code: ./src
          entry_script: predict.py
          program_arguments: >-
            --scale ${{inputs.scale}}
            --task_overhead_timeout 1200
          append_row_to: ${{outputs.job_output_file}}
        """))
    r = run_mltrain("job", "create", "--file", "job.yml", cwd=job, timeout=180)
    assert r.rc == 0, r.out + r.err
    assert "--task_overhead_timeout: tunes Azure's parallel service; accepted, not used here" in r.out + r.err
    run = only_run(home)
    assert len(run["ranks"]) == 2
    rows = (Path(run["dir"]) / "outputs" / "job_output_file").read_text().splitlines()
    assert rows == [f"{i} {i * 6}" for i in range(400)]
    batches = json.loads((Path(run["dir"]) / "parallel" / "batches.json").read_text())
    assert len(batches) == 4 and sum(b["items"] for b in batches) == 400  # 1 KB each of a 3.8 KB table


#: Each row leaves a mark of its own (a row scored twice fails), then a row of its id and text (line breaks as |).
ROWS_ONCE = """\
import os
def run(frame):
    out = []
    for row in frame.itertuples():
        os.close(os.open(os.path.join(os.environ["MARKS"], str(row.id)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        out.append(f"{row.id} {row.text.replace(chr(10), '|')}")
    return out
"""


def test_a_quoted_field_with_a_line_break_stays_whole_and_every_row_is_scored_once(home, project, tmp_path):
    # issue 63: cut at line ends, two of 7 mini-batches failed in pandas (EOF inside string), rows 30-48 were
    # never scored, items_total read 80, and the job still ended Completed
    data = tmp_path / "notes.csv"
    text = {i: f'note {i}, line one\nline two "{i}"' if i % 3 == 0 else f"note {i}" for i in range(60)}
    with open(data, "w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([("id", "text")] + [(i, text[i]) for i in range(60)])
    marks = tmp_path / "marks"
    marks.mkdir()
    r = _parallel(project, ROWS_ONCE, data, "job.input_format=tabular", "job.mini_batch_size=200b",
                  "job.max_concurrency_per_instance=2", f"+environment.environment_variables.MARKS={marks}")
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    assert run["status"] == "Completed"
    rows = (Path(run["dir"]) / "outputs" / "parallel_run_step.txt").read_text().splitlines()
    assert rows == [f"{i} {text[i]}".replace("\n", "|") for i in range(60)]  # whole, in input order
    assert sorted(int(m.name) for m in marks.iterdir()) == list(range(60))  # each once
    last = {m["name"]: m["value"] for m in metric_rows(run["dir"])}
    assert last["items_total"] == 60 and last["mini_batches_failed"] == 0 and last["items_failed"] == 0
    assert last["mini_batches_total"] >= 5  # 200 bytes a mini-batch: cut beside a two-line record more than once


def test_a_pipeline_parallel_node_scores_the_files_an_earlier_step_wrote(home, tmp_path):
    job = tmp_path / "pipe"
    (job / "prep").mkdir(parents=True)
    (job / "prep" / "make.py").write_text("import os, sys\nos.makedirs(sys.argv[1], exist_ok=True)\n"
                                          "for i in range(12):\n"
                                          "    open(os.path.join(sys.argv[1], f'n{i:02d}.txt'), 'w').write(str(i * i))\n")
    (job / "score").mkdir()
    (job / "score" / "square.py").write_text("import os\ndef run(mini_batch):\n"
                                             "    return [f'{os.path.basename(p)},{open(p).read()}' for p in mini_batch]\n")
    (job / "pipeline.yml").write_text(textwrap.dedent("""\
        type: pipeline
        display_name: par-pipe
        jobs:
          prepare:
            type: command
            code: ./prep
            command: python make.py ${{outputs.files}}
            outputs: {files: {type: uri_folder}}
          score:
            type: parallel
            inputs: {data: {type: uri_folder, path: "${{parent.jobs.prepare.outputs.files}}"}}
            outputs: {scores: {type: uri_folder}}
            input_data: ${{inputs.data}}
            mini_batch_size: "5"
            max_concurrency_per_instance: 2
            task: {type: run_function, code: ./score, entry_script: square.py, append_row_to: "${{outputs.scores}}"}
        """))
    r = run_mltrain("job", "create", "--file", "pipeline.yml", cwd=job, timeout=180)
    assert r.rc == 0, r.out + r.err
    score = next(x for x in runs(home) if x["dir"].endswith(".score"))
    assert (Path(score["dir"]) / "outputs" / "scores" / "parallel_run_step.txt").read_text().splitlines() == \
        [f"n{i:02d}.txt,{i * i}" for i in range(12)]


def test_a_pipeline_parallel_node_appends_its_rows_to_a_uri_file_output(home, tmp_path):
    # Azure's cli/jobs/pipelines/iris-batch-prediction-using-parallel: the node's output is a uri_file, the rows
    # are that file (the pipeline engine makes every step output as a folder before the step runs)
    job = tmp_path / "pipe"
    (job / "data").mkdir(parents=True)
    for i in range(4):
        (job / "data" / f"n{i}.txt").write_text(str(i))
    (job / "score").mkdir()
    (job / "score" / "echo.py").write_text("import os\ndef run(mini_batch):\n"
                                           "    return [f'{os.path.basename(p)}:{open(p).read()}' for p in mini_batch]\n")
    (job / "pipeline.yml").write_text(textwrap.dedent("""\
        type: pipeline
        jobs:
          score:
            type: parallel
            inputs: {data: {type: uri_folder, path: ./data}}
            outputs: {job_output_file: {type: uri_file, mode: rw_mount}}
            input_data: ${{inputs.data}}
            mini_batch_size: "2"
            task: {type: run_function, code: ./score, entry_script: echo.py,
                   append_row_to: "${{outputs.job_output_file}}"}
        """))
    r = run_mltrain("job", "create", "--file", "pipeline.yml", cwd=job, timeout=180)
    assert r.rc == 0, r.out + r.err
    score = next(x for x in runs(home) if x["dir"].endswith(".score"))
    assert (Path(score["dir"]) / "outputs" / "job_output_file").read_text().splitlines() == [f"n{i}.txt:{i}"
                                                                                            for i in range(4)]


def test_bad_parallel_jobs_get_one_line_each_before_any_worker_starts(home, project, tmp_path):
    data = _files(tmp_path / "data", 3)
    (project / "norun.py").write_text("def init():\n    pass\n")
    (project / "score.py").write_text(ONCE)
    cases = [
        (("job.entry_script=missing.py", f"job.input_data={data}"), "job.entry_script: file 'missing.py' does not exist"),
        (("job.entry_script=norun.py", f"job.input_data={data}"), "defines no run(mini_batch) function"),
        (("job.entry_script=score.py", f"job.input_data={data}", "job.mini_batch_size=ten"),
         "job.mini_batch_size: 'ten' cannot be read: expected a number of files"),
        (("job.entry_script=score.py", f"job.input_data={data}", "job.input_format=tabular"),
         "holds no table (.csv, .tsv, .parquet) for tabular input"),
        (("job.entry_script=score.py", f"job.input_data={tmp_path / 'nowhere'}"), "does not exist"),
    ]
    for args, expected in cases:
        r = run_mltrain("job=parallel", f"job.source_directory={project}", *args, cwd=project)
        assert r.rc != 0 and expected in r.err, (args, r.err)
        assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err, r.err
    assert leftovers(home) == []
    assert sorted(p.name for p in data.iterdir()) == ["f001.txt", "f002.txt", "f003.txt"]


#: Like ONCE, but an item fails while the file $BROKEN exists (say, a model server that is down).
RESUMABLE = ONCE.replace("        name = os.path.basename(path)\n", """        name = os.path.basename(path)
        if name == "f019.txt" and os.path.exists(os.environ["BROKEN"]):
            raise RuntimeError("the model server is down")
""")


def test_resume_runs_only_the_mini_batches_not_done(home, project, tmp_path):
    data = _files(tmp_path / "data", 30)
    marks, broken = tmp_path / "marks", tmp_path / "broken"
    marks.mkdir()
    broken.touch()
    r = _parallel(project, RESUMABLE, data, "job.mini_batch_size=2", "job.max_retries=0",
                  "job.mini_batch_error_threshold=0", f"+environment.environment_variables.MARKS={marks}",
                  f"+environment.environment_variables.BROKEN={broken}")
    assert r.rc != 0 and "1 mini-batches failed, more than mini_batch_error_threshold 0" in r.out + r.err
    run = only_run(home)
    assert run["status"] == "Failed"
    first = {m.name.split(".txt.")[0] for m in marks.iterdir()}
    assert "f019" not in first and len(first) < 30
    broken.unlink()
    r = run_mltrain("runs", "resume", run["id"], cwd=project, timeout=120)
    assert r.rc == 0, r.out + r.err
    assert only_run(home)["status"] == "Completed"
    # every item once over both launches (a second run of one would have failed on its mark)
    assert sorted(m.name.split(".txt.")[0] for m in marks.iterdir()) == [f"f{i:03d}" for i in range(1, 31)]
    rows = (Path(run["dir"]) / "outputs" / "parallel_run_step.txt").read_text().splitlines()
    assert rows == [f"f{i:03d}.txt item {i}" for i in range(1, 31)]
    assert f"parallel job resumed: {len(first) // 2} of 15 mini-batches were done" in \
        (Path(run["dir"]) / "logs" / "rank_0.log").read_text()


def test_cancel_stops_every_worker(home, project, tmp_path):
    data = _files(tmp_path / "data", 40)
    pids = tmp_path / "pids"
    pids.mkdir()
    slow = textwrap.dedent("""\
        import os, time
        def init():
            open(os.path.join(os.environ["PIDS"], str(os.getpid())), "w").close()
        def run(mini_batch):
            time.sleep(1)
            return mini_batch
        """)
    (project / "score.py").write_text(slow)
    driver = subprocess.Popen([*mltrain_exe(), "job=parallel", f"job.source_directory={project}",
                               "job.entry_script=score.py", f"job.input_data={data}", "job.mini_batch_size=1",
                               "job.max_concurrency_per_instance=2", "distribution.node_count=2",
                               f"+environment.environment_variables.PIDS={pids}"], cwd=project,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        until(lambda: len(list(pids.iterdir())) == 4, 60, "four workers started")
        run = only_run(home)
        until(lambda: any((Path(run["dir"]) / "parallel" / "done").iterdir()), 60, "a mini-batch done")
        r = run_mltrain("runs", "cancel", run["id"], cwd=project)
        assert r.rc == 0, r.out + r.err
        assert driver.wait(60) != 0
    finally:
        driver.kill()
    assert only_run(home)["status"] == "Canceled"
    until(lambda: not any(pid_alive(int(p.name)) for p in pids.iterdir()), 30, "every worker gone")


def test_partition_keys_give_each_group_of_a_table_to_run_with_its_key(home, project, tmp_path):
    table = tmp_path / "sales"
    table.mkdir()
    rows = [f"{store},{brand},{week},{store * 10 + week}" for store in (1, 2) for brand in ("a", "b") for week in range(3)]
    (table / "part1.csv").write_text("Store,Brand,Week,Quantity\n" + "\n".join(rows[:6]) + "\n")
    (table / "part2.csv").write_text("Store,Brand,Week,Quantity\n" + "\n".join(rows[6:]) + "\n")
    script = textwrap.dedent("""\
        import pandas as pd
        def run(input_data, mini_batch_context):
            key = mini_batch_context.partition_key_value
            assert isinstance(input_data, pd.DataFrame)
            return [f"{key['Store']}-{key['Brand']} rows={len(input_data)} total={int(input_data['Quantity'].sum())}"]
        """)
    r = _parallel(project, script, table, "job.input_format=tabular", "job.partition_keys=[Store,Brand]",
                  "job.max_concurrency_per_instance=2")
    assert r.rc == 0, r.out + r.err
    out = (Path(only_run(home)["dir"]) / "outputs" / "parallel_run_step.txt").read_text().splitlines()
    assert out == ["1-a rows=3 total=33", "1-b rows=3 total=33", "2-a rows=3 total=63", "2-b rows=3 total=63"]
