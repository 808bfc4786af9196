"""mltrain's Hydra plugins: the launcher (`hydra/launcher=mltrain`) and the config search path.

Hydra imports every module of every hydra_plugins package at start-up, for every Hydra app on the
machine, so these modules import nothing heavy at module level.
"""
