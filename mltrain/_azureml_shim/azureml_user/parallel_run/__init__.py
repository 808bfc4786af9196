"""`EntryScript`, as Azure's parallel run service gives it to an entry script: a logger (into this worker's
log, logs/user/stderr/<host>/processNNN.stderr.txt, at the job's logging_level), the folders it works in."""
from __future__ import annotations

import logging
import os
import sys
from typing import Optional

_LOGGER: Optional[logging.Logger] = None


class EntryScript:
    @property
    def logger(self) -> logging.Logger:
        global _LOGGER
        if _LOGGER is None:
            _LOGGER = logging.getLogger("azureml_user.parallel_run")
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(asctime)s|%(levelname)s|%(process)d|%(message)s"))
            _LOGGER.addHandler(handler)
            _LOGGER.setLevel(os.environ.get("AZUREML_PARALLEL_LOGGING_LEVEL", "INFO").upper())
            _LOGGER.propagate = False
        return _LOGGER

    @property
    def working_dir(self) -> str:
        return os.getcwd()

    @property
    def output_dir(self) -> str:
        """Where a summary_only job's script writes its own files: the run's outputs folder."""
        return os.environ.get("MLTRAIN_OUTPUTS_DIR", os.getcwd())

    @property
    def log_dir(self) -> str:
        return os.path.join(os.environ.get("MLTRAIN_RUN_DIR", os.getcwd()), "logs", "user")

    @property
    def config(self) -> dict:
        return {"process": os.environ.get("MLTRAIN_PARALLEL_PROCESS")}
