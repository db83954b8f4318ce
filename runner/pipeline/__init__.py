"""Loading and checking a pipeline: YAML with positions, schemas, templating, the typed Pipeline."""
