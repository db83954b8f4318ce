"""Talking to models: one run's LLM service (`service`: a call through layers around one
transport, each with one job (`layers`): the response cache and a sweep's known failures, the
call log to a recorder, reading the answer and asking again to repair it, then sending; what
they pass each other: `request`) over four packages.

The packages: client/ (a request from a model spec to an answer on the wire), cache/ (the
response cache), batch/ (a provider's batch API) and calls/ (calls.jsonl). Beside them:
writer.py (what the run writes as calls end), tally.py (failures per item and endpoint, and a
worker's accounting sent to the driver) and shared_client.py (what the services of one
long-lived process share: `runner serve`)."""
