"""`runner view`: a local web app to browse runs, compare them and review their verdicts."""
