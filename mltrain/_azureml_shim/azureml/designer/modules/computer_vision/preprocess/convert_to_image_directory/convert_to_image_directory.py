"""Azure's Convert to Image Directory module: `--input-path PATH --output-path PATH`, on mltrain's component."""
import sys

from azureml.designer.modules.computer_vision import _cli

MODULE = "convert_to_image_directory"

if __name__ == "__main__":
    _cli.ensure_mltrain(__spec__.name)
    args = _cli.parse(sys.argv[1:], {"input_path": str, "output_path": str}, ["input_path", "output_path"], MODULE)

    def call():
        from mltrain.components.convert_to_image_directory import convert

        convert(args["input_path"], args["output_path"])

    _cli.run(MODULE, call)
