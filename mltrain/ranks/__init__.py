"""Inside the ranks: the environment contract every backend sets, the process runner, per-rank reports."""
