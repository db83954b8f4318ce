"""`runner render`: the preview sink and the cost estimate of what a run would send."""
