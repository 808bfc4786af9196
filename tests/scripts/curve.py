"""Logs a known curve of `score`, one value every --pause seconds, so a sweep's early-termination
policy has to cancel exactly the members its rule names. --curve picks a row of CURVES, or gives
the values themselves (comma-separated); --nan-at makes that interval a NaN."""
import argparse
import time

from mltrain import run

CURVES = {
    "a": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],   # the leader
    "b": [0.9, 1.9, 2.9, 3.9, 4.9, 5.9],   # close behind it
    "c": [0.5, 1.0, 1.5, 2.0, 2.5, 3.0],   # half as good
    "d": [0.1, 0.1, 0.1, 0.1, 0.1, 0.1],   # flat
}

p = argparse.ArgumentParser()
p.add_argument("--curve", default="a")
p.add_argument("--pause", type=float, default=0.4)
p.add_argument("--mode", default="ok", choices=["ok", "fail"], help="fail: exit 3 after the first value")
a = p.parse_args()
values = CURVES.get(a.curve) or [float(v) for v in a.curve.split(",")]
for i, value in enumerate(values, start=1):
    run.log("score", value, step=i)
    if a.mode == "fail":
        raise SystemExit(3)
    time.sleep(a.pause)
print("logged", len(values), "values")
