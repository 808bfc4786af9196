"""`python -m mltrain.hydra_task`: the rank program of a plain Hydra app. job.json files name this
module, so it stays; the code is mltrain.ranks.hydra_task."""
from mltrain.ranks.hydra_task import main

if __name__ == "__main__":
    main()
