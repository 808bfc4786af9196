"""Azure ML v2 job files (`az ml job create --file job.yml`) run by mltrain: `mltrain job create --file`.

A command, sweep or pipeline job file is read with its line numbers (yaml_lines), checked against
Azure's published v2 schemas (v2_schema), its `azureml:` references resolved to local things
(references), and then mapped onto mltrain's own engines: a command job becomes a `job=command` run, a
sweep job a HyperDrive sweep of mltrain.sweeps, a pipeline job a pipeline of mltrain.pipelines. Nothing
here runs a job itself; nothing here imports torch or MLflow.
"""
