"""LLM calls: model specs, cache, transport (litellm, imported lazily), parsing, limits."""
