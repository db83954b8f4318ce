"""Text algorithms: quote matching over a normalised source (`quotes`), sentence splitting
(`sentences`), the seeded perturbations `runner probe` makes (`perturb`) and how alike two
texts are by OpenAI's text_similarity metrics (`similarity`); the pipeline language offers
them as filters and steps."""
