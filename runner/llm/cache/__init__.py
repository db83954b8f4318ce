"""The response cache: the key of a request and what is stored for its answer (key.py), and the
diskcache store of JSON values it shares with search results, with `runner cache stats` / `clear`
(store.py)."""
