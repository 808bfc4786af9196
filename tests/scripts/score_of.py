"""Logs `score` as a known function of its parameter, one value every --pause seconds: a sweep's best
member and value follow from the sampled parameters alone (tests/test_sweep_resume.py)."""
import argparse
import time

from mltrain import run

p = argparse.ArgumentParser()
p.add_argument("--x", type=float, required=True)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--pause", type=float, default=0.4)
a = p.parse_args()
for i in range(1, a.steps + 1):
    run.log("score", round(i / a.steps * (1 - (a.x - 0.3) ** 2), 9), step=i)
    time.sleep(a.pause)
print("logged", a.steps, "values")
