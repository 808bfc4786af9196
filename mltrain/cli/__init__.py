"""The `mltrain` command (mltrain.cli.main) and its management subcommands (runs, env)."""
from mltrain.cli.main import main

__all__ = ["main"]
