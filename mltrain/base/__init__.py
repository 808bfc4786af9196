"""The bottom every package stands on, standard library only: mltrain's errors (errors.py), its state root
MLTRAIN_HOME (home.py), files written whole (atomic.py) and content digests (digest.py), process groups and
the foreground command (processes.py), and the signals that cancel (signals.py)."""
