"""Pipeline step 3: score the prepared numbers with the model."""
import argparse
import json
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--model", required=True)
p.add_argument("--data", required=True)
p.add_argument("--out", required=True)
a = p.parse_args()
model = json.loads(Path(a.model, "model.json").read_text())
numbers = [float(x) for x in Path(a.data, "data.txt").read_text().split()]
Path(a.out, "scores.txt").write_text("\n".join(str(x / model["total"]) for x in numbers) + "\n")
print(f"scored {len(numbers)} numbers with total {model['total']} from {model['world_size']} ranks")
