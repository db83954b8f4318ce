"""Calibration: a judge's results against human labels (`runner eval`) and a grid of
settings replayed from the LLM cache (`runner sweep`).

numpy, scipy and scikit-learn are imported only here, and only when a metric is computed:
run, validate and render never load them."""
