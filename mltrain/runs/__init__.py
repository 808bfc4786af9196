"""Runs: statuses, the run record (run.json), how a run ends, metrics, the console, and the run handle."""
