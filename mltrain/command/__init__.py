"""A command, from typed parts to its engine: the one in-process entry of `mltrain [-m]`, `job create`, `runs
resume` and the Python API's detached driver (mltrain.command.app), and which engine runs it
(mltrain.command.engines). Above the engines it chooses between (mltrain.sweeps, mltrain.pipelines,
mltrain.launch.members)."""
