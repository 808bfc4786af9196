"""`python -m mltrain.hydra_task`: the rank program of a plain Hydra app. job.json files name this
module, so it stays; the code is mltrain.ranks.hydra_app_rank."""
from mltrain.ranks.hydra_app_rank import main

if __name__ == "__main__":
    main()
