"""Calibration: a judge's results against human labels (`runner eval`), a grid of settings
replayed from the LLM cache (`runner sweep`), and two runs item by item (`runner diff`).

numpy, scipy and scikit-learn are imported only here, and only when a metric is computed:
run, validate and render never load them."""
