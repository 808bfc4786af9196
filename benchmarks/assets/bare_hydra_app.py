"""The baseline a Hydra user already pays: a bare Hydra app with a small config."""
from dataclasses import dataclass

import hydra
from hydra.core.config_store import ConfigStore


@dataclass
class Conf:
    epochs: int = 5
    batch_size: int = 16
    learning_rate: float = 0.001


ConfigStore.instance().store(name="bare", node=Conf)


@hydra.main(config_path=None, config_name="bare", version_base="1.3")
def main(cfg) -> None:
    print(cfg)


if __name__ == "__main__":
    main()
