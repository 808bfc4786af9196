"""A plain Hydra app, as a user's would be: swept with -m on whichever launcher the command line picks."""
from dataclasses import dataclass

import hydra
from hydra.core.config_store import ConfigStore


@dataclass
class Conf:
    x: int = 0


ConfigStore.instance().store(name="sweep", node=Conf)


@hydra.main(config_path=None, config_name="sweep", version_base="1.3")
def main(cfg) -> int:
    return cfg.x * 2


if __name__ == "__main__":
    main()
