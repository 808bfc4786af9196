"""A Slurm cluster reached over ssh (compute.login): mltrain.backends.remote.backend says how."""
