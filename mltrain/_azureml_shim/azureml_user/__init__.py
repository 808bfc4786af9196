"""azureml_user: what Azure's parallel run service gives an entry script (`from azureml_user.parallel_run import
EntryScript`), for entry scripts run by mltrain's parallel job."""
