"""Calls answered through a provider's batch API (OpenAI-compatible /v1/files and
/v1/batches): gathered into batches and collected (collector.py), what the collector keeps
and each batch followed until it ends (polling.py), the request and answer lines and the HTTP
client (client.py), and the batches submitted, on disk before anyone polls them (store.py)."""
