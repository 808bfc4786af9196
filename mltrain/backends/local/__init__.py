"""The local backend: every rank a child process of the driver, on this machine."""
