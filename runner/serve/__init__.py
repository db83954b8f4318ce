"""`runner serve`: the pipelines of a folder as an HTTP service (FastAPI on uvicorn).

Judging on request and in jobs, results kept in a database by what they judged, people's
feedback into the review store `runner view` reads; and `client`, a small Python client of
this HTTP API (httpx only: it imports nothing of the server)."""
