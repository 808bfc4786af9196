"""Only what pyproject.toml cannot say: the `.pth` file that puts mltrain's Azure ML SDK stand-ins on
every interpreter's path of this environment, *after* site-packages, so that `python control.py` finds
`azureml.core` and a real azureml-core, once installed, always wins (pytest-cov ships its .pth the
same way: a build_py step that copies it to the top of the wheel)."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "mltrain-azureml-stand-ins.pth"


class BuildWithPth(build_py):
    def run(self) -> None:
        super().run()
        # A relative directory line in a .pth is appended to sys.path (site.addpackage) after site-packages.
        with open(os.path.join(self.build_lib, PTH), "w", encoding="utf-8") as handle:
            handle.write("mltrain/_azureml_shim\n")

    def get_outputs(self, include_bytecode: bool = True):  # the wheel lists what build_py made
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, PTH)]


setup(cmdclass={"build_py": BuildWithPth})
