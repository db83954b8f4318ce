"""Step types, one module each (plus its schema in runner/schemas/steps/), found by name."""
