"""Only what pyproject.toml cannot say: the `.pth` file that puts mltrain's Azure ML SDK stand-ins on
every interpreter's path of this environment, *after* site-packages, so that `python control.py` finds
`azureml.core` and a real azureml-core, once installed, always wins (pytest-cov ships its .pth the
same way: a build_py step that copies it to the top of the wheel)."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "mltrain-azureml-stand-ins.pth"
# azure-ai-ml on mltrain (mltrain.azureml.sdk_v2): one environment lookup at start, the hook only when selected
SDK_V2_PTH = "mltrain-azureml-sdk-v2.pth"
SDK_V2_LINE = ("import os; os.environ.get('MLTRAIN_AZUREML', '') not in ('', '0', 'false', 'no') and "
               "__import__('mltrain.azureml.sdk_v2.hook', fromlist=['startup']).startup()\n")


class BuildWithPth(build_py):
    def run(self) -> None:
        super().run()
        # A relative directory line in a .pth is appended to sys.path (site.addpackage) after site-packages.
        with open(os.path.join(self.build_lib, PTH), "w", encoding="utf-8") as handle:
            handle.write("mltrain/_azureml_shim\n")
        with open(os.path.join(self.build_lib, SDK_V2_PTH), "w", encoding="utf-8") as handle:
            handle.write(SDK_V2_LINE)

    def get_outputs(self, include_bytecode: bool = True):  # the wheel lists what build_py made
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, p) for p in (PTH, SDK_V2_PTH)]


setup(cmdclass={"build_py": BuildWithPth})
