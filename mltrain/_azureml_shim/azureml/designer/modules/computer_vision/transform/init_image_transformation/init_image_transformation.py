"""Azure's Init Image Transformation module: its switches (`--resize True`), their sizes (`--size 256`) and
`--output-path`, on mltrain's component."""
import sys

from azureml.designer.modules.computer_vision import _cli

MODULE = "init_image_transformation"

if __name__ == "__main__":
    _cli.ensure_mltrain(__spec__.name)
    from mltrain.components.image_transformation import PARAMETERS

    types = {"output_path": str}
    for switch, _op, size in PARAMETERS:
        types[switch] = bool
        if size:
            types[size] = int
    args = _cli.parse(sys.argv[1:], types, ["output_path"], MODULE)

    def call():
        import dataclasses

        from mltrain.components.init_image_transformation import init
        from mltrain.jobspec.job_schemas import InitImageTransformationJobConf

        defaults = dataclasses.asdict(InitImageTransformationJobConf())  # Azure's published defaults
        output = args.pop("output_path")
        init({**defaults, **args}, output)

    _cli.run(MODULE, call)
