"""System metrics in every run (issue 48): the ranks' CPU and memory (psutil) and, where they were given GPUs,
the GPUs' use (NVML), sampled into the run's metrics under MLflow's own names, shown by `runs show`."""
from __future__ import annotations

import re

from mpi_support import require_mpi
from support import metric_rows, only_run, run_mltrain

BURN = """\
import time
start = time.time()
while time.time() - start < 2.0:  # one core busy for two seconds
    pass
block = bytearray(80_000_000)  # and 80 MB held for one more
time.sleep(1.0)
"""


def test_a_cpu_run_records_its_system_metrics(home, project):
    (project / "burn.py").write_text(BURN)
    r = run_mltrain("job=script", "job.script=burn.py", "run.system_metrics_interval_s=0.3", cwd=project)
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    rows = [x for x in metric_rows(run["dir"]) if x["name"].startswith("system/")]
    by = {}
    for x in rows:
        by.setdefault(x["name"], []).append(x["value"])
    for name in ("system/cpu_utilization_percentage", "system/system_memory_usage_megabytes",
                 "system/process_cpu_utilization_percentage", "system/process_memory_usage_megabytes"):
        assert len(by.get(name, [])) >= 5, (name, sorted(by))
    assert max(by["system/process_cpu_utilization_percentage"]) > 60  # the busy second was seen as one core
    assert max(by["system/process_memory_usage_megabytes"]) - min(by["system/process_memory_usage_megabytes"]) > 60
    assert not any(n.startswith("system/gpu_") for n in by)  # no GPU here: no GPU figures, and no error
    shown = run_mltrain("runs", "show", run["id"], cwd=project)
    assert re.search(r"system/process_cpu_utilization_percentage: [\d.]+, [\d.]+, [\d.]+ over \d+", shown.out), shown.out


def test_system_metrics_are_off_with_one_key(home, project):
    (project / "burn.py").write_text(BURN)
    r = run_mltrain("job=script", "job.script=burn.py", "run.system_metrics=false",
                    "run.system_metrics_interval_s=0.3", cwd=project)
    assert r.rc == 0, r.out + r.err
    assert not [x for x in metric_rows(only_run(home)["dir"]) if x["name"].startswith("system/")]


def test_each_mpi_rank_samples_its_own_process(home, project):
    require_mpi()
    (project / "burn.py").write_text(BURN)
    r = run_mltrain("job=script", "job.script=burn.py", "distribution=mpi", "distribution.process_count_per_node=2",
                    "run.system_metrics_interval_s=0.3", cwd=project, timeout=180)
    assert r.rc == 0, r.out + r.err
    rows = [x for x in metric_rows(only_run(home)["dir"]) if x["name"] == "system/process_memory_usage_megabytes"]
    assert {x["rank"] for x in rows} == {0, 1}
