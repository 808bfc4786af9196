"""A plain Hydra app whose task sleeps (1 s by default) and returns a value: one short trial of a large sweep
(issue 36's benchmark, benchmarks/bench_slurm_scale.py)."""
import time
from dataclasses import dataclass

import hydra
from hydra.core.config_store import ConfigStore


@dataclass
class Conf:
    x: int = 0
    seconds: float = 1.0


ConfigStore.instance().store(name="sleep", node=Conf)


@hydra.main(config_path=None, config_name="sleep", version_base="1.3")
def main(cfg) -> int:
    time.sleep(cfg.seconds)
    return cfg.x * 2


if __name__ == "__main__":
    main()
