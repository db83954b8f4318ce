"""`runner probe`: how far a judge can be trusted. The pipeline runs on its items and on
perturbed copies of them (its `probes:`), in one run folder like any run (cached, so a rerun
after a prompt change sends only what changed); then each copy's verdict, the final one and
each juror's, is compared with its original's, and probe.json, probe.md and probe.html say
how often they flip, per probe, with a confidence interval."""
