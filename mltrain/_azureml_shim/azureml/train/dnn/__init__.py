"""azureml.train.dnn: the framework estimators of seed 002 (`PyTorch(...)`, `TensorFlow(...)`)."""
from __future__ import annotations

from azureml.train.estimator import Estimator, Gloo, Mpi, Nccl, ParameterServer


class PyTorch(Estimator):
    _framework = "PyTorch"
    DEFAULT_VERSION = "1.6"


class TensorFlow(Estimator):
    _framework = "TensorFlow"
    DEFAULT_VERSION = "2.2"


class Chainer(Estimator):
    _framework = "Chainer"


__all__ = ["Chainer", "Gloo", "Mpi", "Nccl", "ParameterServer", "PyTorch", "TensorFlow"]
