"""Text algorithms the pipeline language offers as filters (sentence splitting, ...)."""
