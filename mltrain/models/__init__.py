"""Models: the registry (Azure ML's Model on MLflow's Model Registry) and its store."""
