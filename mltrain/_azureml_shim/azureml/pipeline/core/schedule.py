"""azureml.pipeline.core.schedule: schedules stay Azure's (a service that starts runs on a timer or on a
datastore change); here cron or the cluster's scheduler starts a published pipeline."""
from azureml.core._refused import SCHEDULE, module_getattr

__getattr__ = module_getattr("azureml.pipeline.core.schedule",
                             {name: SCHEDULE for name in ("Schedule", "ScheduleRecurrence", "TimeZone")})
