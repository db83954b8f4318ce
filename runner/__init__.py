"""runner: declarative YAML pipelines for LLM-as-judge verification."""

__version__ = "0.1.0"
