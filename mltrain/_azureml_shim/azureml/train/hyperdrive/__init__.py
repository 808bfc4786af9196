"""azureml.train.hyperdrive: Azure ML v1's HyperDrive on mltrain's sweep engine (mltrain.sweeps).

The samplings, parameter expressions and early-termination policies are Azure's; each compiles onto
the engine's `sweep.*` settings with Azure's meaning (the same mapping the v2 front end uses,
mltrain.azureml.sweep_job.grammar). Each member gets its sampled values as arguments
(`--name value`, as Azure passes them; a name already starting with `-` is used as it is) and as
AML_PARAMETER_<name>. `Experiment.submit(HyperDriveConfig(...))` returns a HyperDriveRun as soon as
the first member starts; the sweep's driver runs on in its own process, as Azure's does in the cloud.
"""
from __future__ import annotations

from azureml.train.hyperdrive.config import HyperDriveConfig, PrimaryMetricGoal
from azureml.train.hyperdrive.parameter_expressions import (
    choice,
    lognormal,
    loguniform,
    normal,
    qlognormal,
    qloguniform,
    qnormal,
    quniform,
    randint,
    uniform,
)
from azureml.train.hyperdrive.policy import (
    BanditPolicy,
    EarlyTerminationPolicy,
    MedianStoppingPolicy,
    NoTerminationPolicy,
    TruncationSelectionPolicy,
)
from azureml.train.hyperdrive.run import HyperDriveRun
from azureml.train.hyperdrive.sampling import (
    BayesianParameterSampling,
    GridParameterSampling,
    HyperParameterSampling,
    RandomParameterSampling,
)

__all__ = ["BanditPolicy", "BayesianParameterSampling", "EarlyTerminationPolicy", "GridParameterSampling",
           "HyperDriveConfig", "HyperDriveRun", "HyperParameterSampling", "MedianStoppingPolicy",
           "NoTerminationPolicy", "PrimaryMetricGoal", "RandomParameterSampling", "TruncationSelectionPolicy",
           "choice", "lognormal", "loguniform", "normal", "qlognormal", "qloguniform", "qnormal", "quniform",
           "randint", "uniform"]
