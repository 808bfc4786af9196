"""The job spec: the typed schema of a job, the frozen job every layer reads, the run statuses and the
table of job kinds. The bottom layer: it imports nothing of mltrain above it, and nothing heavy."""
