"""Logs a value written in this file and a seeded random draw: a rerun must log the same."""
import random

from mltrain import run

VALUE = 1.5
rng = random.Random(7)
for step in range(1, 4):
    run.log("value", VALUE * step, step=step)
    run.log("draw", rng.random(), step=step)
print("value", VALUE)
