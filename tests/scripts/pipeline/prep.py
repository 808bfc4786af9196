"""Pipeline step 1: read raw numbers (a file or a folder of files), write them scaled into --out."""
import argparse
import os
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--raw", required=True)
p.add_argument("--out", required=True)
a = p.parse_args()
raw = Path(a.raw)
files = sorted(raw.glob("*.txt")) if raw.is_dir() else [raw]
numbers = [float(x) for f in files for x in f.read_text().split()]
scale = float(os.environ.get("AML_PARAMETER_scale", "1"))
Path(a.out, "data.txt").write_text("\n".join(str(x * scale) for x in numbers) + "\n")
print(f"prepared {len(numbers)} numbers into {a.out} (scale {scale}); input env {os.environ['AZUREML_DATAREFERENCE_raw']}")
