"""Configuration: typed schemas, composition of the presets, the search path, validation, Azure ML v1 aliases."""
