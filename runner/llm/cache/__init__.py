"""The response cache: the key of a request (key.py), what is stored for an answer
(entries.py), the diskcache store of JSON values it shares with search results (store.py),
and `runner cache stats` / `clear` (admin.py)."""
