"""The Designer's error names (seed 003), as exception classes whose message starts with the name."""
from mltrain.base.errors import MltrainError


class DesignerError(MltrainError):
    def __init__(self, message: str):
        super().__init__(f"{type(self).__name__}: {message}")


class InvalidModelDirectoryError(DesignerError):
    """The model input is not a model directory (or, for scoring, not a trained one)."""


class NotLabeledDatasetError(DesignerError):
    """An image directory has no label folders, or a label folder has no images."""


class InvalidDatasetError(DesignerError):
    """Training and validation label sets differ."""


class NaNLossError(DesignerError):
    """The training loss became NaN or infinite."""


class DiskFullError(DesignerError):
    """A checkpoint or output could not be written: the device is full (not a Designer name: mltrain's own)."""
