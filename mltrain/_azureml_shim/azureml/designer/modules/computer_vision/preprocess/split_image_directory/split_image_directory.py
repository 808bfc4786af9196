"""Azure's Split Image Directory module: `--src-path --tgt-train-path --tgt-test-path [--fraction 0.9]`."""
import sys

from azureml.designer.modules.computer_vision import _cli

MODULE = "split_image_directory"

if __name__ == "__main__":
    _cli.ensure_mltrain(__spec__.name)
    args = _cli.parse(sys.argv[1:], {"src_path": str, "tgt_train_path": str, "tgt_test_path": str, "fraction": float},
                      ["src_path", "tgt_train_path", "tgt_test_path"], MODULE)

    def call():
        from mltrain.components.split_image_directory import split

        split(args["src_path"], args["tgt_train_path"], args["tgt_test_path"], args.get("fraction", 0.9))

    _cli.run(MODULE, call)
