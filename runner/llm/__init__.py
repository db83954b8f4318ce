"""Talking to models: one run's LLM service (`service`: a call through layers around one
transport, each with one job: the response cache and a sweep's known failures (`known`), the
call log to a recorder (`call_log`), reading the answer and asking again to repair it
(`answers`), then sending; what they pass each other: `request`) over four packages.

- client/: a request from a model spec to a parsed answer on the wire: specs and routing,
  the transports (aiohttp for OpenAI-compatible servers, litellm for the rest), sending with
  limits, retries and deadlines, a local server's capacity, structured output, usage and
  prices, answer parsing;
- cache/: the response cache: its key, its entries, the store and `runner cache`;
- batch/: calls answered through a provider's batch API, and the batches on disk;
- calls/: calls.jsonl, the run's record of every call.

Beside them: writer.py (what
the run writes as calls end), tally.py (failures per item and endpoint), worker_report.py
(a worker's accounting sent to the driver) and shared_client.py (the sender, cache and
writer of answers the services of one long-lived process share: `runner serve`)."""
