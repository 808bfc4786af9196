"""A stand-in for a training job with a known learning curve: accuracy(i) = ceiling * (1 - exp(-i / 3)),
one value per simulated epoch of --epoch-s seconds of real CPU work. Members differ by their ceiling."""
import argparse
import math
import time

from mltrain import run

p = argparse.ArgumentParser()
p.add_argument("--ceiling", type=float, required=True)
p.add_argument("--epochs", type=int, default=10)
p.add_argument("--epoch-s", type=float, default=0.25)
a = p.parse_args()
for i in range(1, a.epochs + 1):
    end = time.process_time() + a.epoch_s
    while time.process_time() < end:  # burn CPU like an epoch would, so CPU-seconds can be compared
        pass
    run.log("accuracy", a.ceiling * (1 - math.exp(-i / 3)), step=i)
