"""The response cache: the key of a request and what is stored for its answer (key.py), the
diskcache store of JSON values it shares with search results (store.py), and
`runner cache stats` / `clear` (admin.py)."""
