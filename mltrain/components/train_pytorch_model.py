"""Train PyTorch Model, one rank: `python -m mltrain.components.train_pytorch_model` (run by the launcher).

Reads the frozen config from $MLTRAIN_RUN_DIR, resumes from the run's latest checkpoint if there is
one, trains, and (rank 0) writes the trained model directory to outputs/model.
"""
from __future__ import annotations

from mltrain.components import data, image_transformation, onnx_export
from mltrain.components import model_directory as models
from mltrain.components.checks import validate_train as validate  # noqa: F401  (the driver's checks: spec.kinds)
from mltrain.components.runtime import RankContext, run_component

MODEL_DIR = "model"


def train(ctx: RankContext) -> None:
    from mltrain.components.trainer import Trainer, seed_everything, write_summary  # heavy

    cfg = ctx.cfg
    seed_everything(int(cfg.trainer.seed))
    train_ds, val_ds = data.datasets(cfg)
    spec = models.spec_from_config(cfg)
    model = models.build(spec, num_classes=len(train_ds.classes))
    trainer = Trainer(ctx, model, train_ds, val_ds, list(train_ds.classes))
    start = trainer.resume()
    state = trainer.fit(start_epoch=start)
    if ctx.is_main:
        weights = trainer.best_weights or trainer.model.state_dict()
        out = ctx.outputs_dir / MODEL_DIR
        # The size the model was trained at, and the inference form of an attached image transformation,
        # go with the model so that Score Image Model reads new images the same way.
        ops = data.attached_transform(data.resolve_dirs(cfg)[0])
        size = data.trained_image_size(cfg, ops)
        models.save_model_dir(out, spec, train_ds.classes, size,
                              {k: v.detach().cpu() for k, v in weights.items()},
                              transform=image_transformation.for_mode(ops, "inference") if ops else None)
        if cfg.trainer.export_onnx:
            # the saved (best) weights, on the CPU in float32: what Score Image Model loads
            exported = models.build({**spec, "pretrained": False}, num_classes=len(train_ds.classes))
            exported.load_state_dict({k: v.detach().cpu().float() for k, v in weights.items()})
            report = onnx_export.export(exported, out, size, int(cfg.trainer.batch_size),
                                        int(cfg.trainer.onnx_opset))
            errors = ", ".join(f"batch {b}: {e['max_abs_error']:.2g}" for b, e in report["verified_batches"].items())
            print(f"ONNX export verified with ONNX Runtime (opset {report['opset']}, {report['bytes']} bytes; "
                  f"largest logit difference {errors}): {out / onnx_export.ONNX_FILE}", flush=True)
        write_summary(ctx.outputs_dir / "training_summary.json", state)
        last = state.history[-1] if state.history else {}
        print(f"trained model directory: {out} (best epoch {state.best_epoch}, "
              f"top-1 {last.get('top1_accuracy', float('nan')):.4f} at the last epoch)", flush=True)


if __name__ == "__main__":
    run_component(train)
