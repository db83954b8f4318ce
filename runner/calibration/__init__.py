"""Calibration: a judge's results against human labels (`runner eval`, with the jurors' error
correlation), a grid of settings, each one run through the API (`runner sweep`), two runs
item by item (`runner diff`), and `runner align` (`align`, `align_search`, `align_judge`): a
judge's prompt and examples changed on dev, shipped only when it beats the original on test.

numpy, scipy and scikit-learn are imported only here, and only when a metric is computed:
run, validate and render never load them."""
