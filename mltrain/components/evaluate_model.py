"""Evaluate Model for classification: Score Image Model's predictions against their true labels.

Reads the scored dataset (Score Image Model's `predictions.csv`, or its output folder) and writes
`evaluation.json` (accuracy; precision, recall, F1 and support per class; their macro and weighted
averages; the confusion matrix with its class order) and `confusion_matrix.png`, the plot Azure's Evaluate
Model offers for multi-class models, drawn headless (matplotlib's Agg). Azure's column names are read too:
`Labels` for the true label and `Multi Class Scored Labels` (or `Scored Labels`) for the prediction.
The metrics come from scikit-learn; both files are written whole (a temporary name, then a rename).
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from mltrain.base.atomic import atomic_write, atomic_write_bytes
from mltrain.base.errors import ConfigError
from mltrain.components.checks import later
from mltrain.components.designer_errors import NotLabeledDatasetError
from mltrain.components.runtime import run_component
from mltrain.runs.metrics import MetricsWriter

OUTPUT = "evaluation"
TRUE_COLUMNS = ("label", "Labels")
PREDICTED_COLUMNS = ("predicted_label", "Multi Class Scored Labels", "Scored Labels")


def validate(cfg: Any) -> None:
    """The driver's checks before anything is queued (spec.kinds)."""
    path = cfg.job.scored_dataset
    if path in (None, "", "???"):
        raise ConfigError("job.scored_dataset", "a value is required (Score Image Model's output)")
    if not later(path) and not Path(str(path)).expanduser().exists():
        raise ConfigError("job.scored_dataset", f"'{path}' does not exist")


def read_scored(path: Any) -> Tuple[List[str], List[str]]:
    """(true labels, predicted labels) of a scored dataset: a CSV file, or a folder holding one."""
    where = Path(str(path)).expanduser()
    if where.is_dir():
        found = sorted(where.glob("*.csv"))
        if len(found) != 1:
            raise ConfigError("job.scored_dataset", f"'{where}' holds {len(found)} CSV files; expected one "
                                                    "(Score Image Model's predictions.csv)")
        where = found[0]
    with open(where, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    columns = list(rows[0]) if rows else []
    truth = next((c for c in TRUE_COLUMNS if c in columns), None)
    predicted = next((c for c in PREDICTED_COLUMNS if c in columns), None)
    if predicted is None:
        raise ConfigError("job.scored_dataset", f"'{where}' has no predicted-label column", PREDICTED_COLUMNS)
    if truth is None or any(not r[truth] for r in rows):
        raise NotLabeledDatasetError(f"'{where}' has no true label for every image: score a labelled image "
                                     "directory to evaluate (Convert to Image Directory with label folders)")
    return [r[truth] for r in rows], [r[predicted] for r in rows]


def metrics(truth: List[str], predicted: List[str]) -> Dict[str, Any]:
    from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support  # heavy

    classes = sorted(set(truth) | set(predicted))
    p, r, f, s = precision_recall_fscore_support(truth, predicted, labels=classes, zero_division=0)
    out: Dict[str, Any] = {"accuracy": float(accuracy_score(truth, predicted)), "images": len(truth),
                           "classes": classes,
                           "per_class": {c: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]),
                                             "support": int(s[i])} for i, c in enumerate(classes)}}
    for average in ("macro", "weighted"):
        ap, ar, af, _ = precision_recall_fscore_support(truth, predicted, labels=classes, average=average,
                                                        zero_division=0)
        out[average] = {"precision": float(ap), "recall": float(ar), "f1": float(af)}
    out["confusion_matrix"] = {"labels": classes, "rows_are": "true label", "columns_are": "predicted label",
                               "matrix": confusion_matrix(truth, predicted, labels=classes).tolist()}
    return out


def plot(result: Dict[str, Any], target: Path) -> None:
    import matplotlib  # heavy

    matplotlib.use("Agg")  # headless: ranks have no display
    import matplotlib.pyplot as plt  # heavy

    labels, matrix = result["classes"], result["confusion_matrix"]["matrix"]
    side = max(4.0, 0.45 * len(labels) + 2)
    fig, ax = plt.subplots(figsize=(side, side))
    ax.imshow(matrix, cmap="Blues")
    ax.set(xticks=range(len(labels)), yticks=range(len(labels)), xticklabels=labels, yticklabels=labels,
           xlabel="Predicted label", ylabel="True label", title=f"Accuracy {result['accuracy']:.4f}")
    plt.setp(ax.get_xticklabels(), rotation=45, ha="right")
    peak = max((max(row) for row in matrix), default=0)
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            ax.text(j, i, str(value), ha="center", va="center", color="white" if value > peak / 2 else "black")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    atomic_write_bytes(target, buffer.getvalue())


def evaluate(scored_dataset: Any, output_path: Any, log: Callable[[str], None] = print) -> Dict[str, Any]:
    truth, predicted = read_scored(scored_dataset)
    result = metrics(truth, predicted)
    out = Path(str(output_path)).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    plot(result, out / "confusion_matrix.png")
    atomic_write(out / "evaluation.json", json.dumps(result, indent=2) + "\n")
    log(f"Evaluate Model: accuracy {result['accuracy']:.4f} on {result['images']} images, macro F1 "
        f"{result['macro']['f1']:.4f}, weighted F1 {result['weighted']['f1']:.4f} -> {out}")
    return result


def body(ctx: Any) -> None:
    if not ctx.is_main:
        return
    job = ctx.cfg.job
    result = evaluate(job.scored_dataset, job.output_path or ctx.outputs_dir / OUTPUT)
    MetricsWriter(ctx.run_dir / "metrics.jsonl", rank=ctx.rank).log_many(
        {"accuracy": result["accuracy"], "macro_f1": result["macro"]["f1"], "weighted_f1": result["weighted"]["f1"],
         "macro_precision": result["macro"]["precision"], "macro_recall": result["macro"]["recall"]}, step=0)


if __name__ == "__main__":
    run_component(body)
