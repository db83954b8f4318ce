"""`runner view`: a local web app (Starlette, uvicorn) to browse the run folders, compare runs
and review their verdicts into the one review store, over per-run SQLite indexes beside them."""
