"""The Python API, the top layer: `mltrain.submit` (api.py: one typed request in, a run handle out), the run
handle `mltrain.Run` (handle.py), and run history (history.py: `runs plot|compare|rerun`)."""
