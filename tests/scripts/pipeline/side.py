"""An independent branch: waits a little and writes a note."""
import argparse
import time
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--sleep", type=float, default=0.0)
a = p.parse_args()
time.sleep(a.sleep)
Path(a.out, "note.txt").write_text("side branch done\n")
print("side branch done")
