"""Azure's Apply Image Transformation module: `--mode "For training"|"For inference" --input-transform-path
--input-image-path --output-path` (also spelt `--input-image-transform-path --input-image-dir-path`), on
mltrain's component."""
import sys

from azureml.designer.modules.computer_vision import _cli

MODULE = "apply_image_transformation"

if __name__ == "__main__":
    _cli.ensure_mltrain(__spec__.name)
    names = ["mode", "input_transform_path", "input_image_path", "output_path"]
    # Azure's image_classification_with_densenet component (cli/jobs/pipelines-with-components) spells two
    # of the module's flags its own way; the Designer's spelling is the module's.
    spelled = {"input_image_transform_path": "input_transform_path", "input_image_dir_path": "input_image_path"}
    args = _cli.parse(sys.argv[1:], dict.fromkeys(names, str), names, MODULE, spelled)

    def call():
        from mltrain.components.apply_image_transformation import apply

        apply(args["mode"], args["input_transform_path"], args["input_image_path"], args["output_path"])

    _cli.run(MODULE, call)
