"""`runner serve`: the pipelines of a folder as an HTTP service (FastAPI on uvicorn).

Judging on request and in jobs, results kept in a database by what they judged, people's
feedback into the review store `runner view` reads. The modules: `served_pipelines` (the served
pipelines, what a request may set, the hash that keys results), `judging` (one long-lived
runtime per pipeline variant, the results store in front, one computation per key with
`flights`), `jobs` and `job_files` (runs on the server's loop, their inputs, resumed after a
crash), `feedback`, `app` and `api_models` (the routes and their bodies), `http` (errors,
body limits, tokens, Host names), `server` (the checks before uvicorn binds); and `client`, a small
Python client of this HTTP API (httpx only: it imports nothing of the server)."""
