"""Text algorithms: quote matching (and normalisation) over source text."""
