"""`runner serve`: the pipelines of a folder as an HTTP service (FastAPI on uvicorn).

Judging on request and in jobs, results kept in a database by what they judged, people's
feedback into the review store `runner view` reads. The modules: `catalog` (the served
pipelines and what a request may set), `judging` (one long-lived runtime per pipeline
variant, the results store, one computation per key), `jobs` (runs on the server's loop,
resumed after a crash), `feedback`, `app` (the routes), `http` (errors, limits, tokens),
`server` (uvicorn, and the checks before it binds)."""
