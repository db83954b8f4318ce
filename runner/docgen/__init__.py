"""docs/pipeline-language.md, generated from the code: the step registry and the steps'
schemas, the sandbox's filters, tests and globals (their docstrings, and examples that a
test runs), the names templates see and the input adapters. `python -m runner.docgen`
rewrites the page; `python -m runner.docgen --check` exits 1 when it is stale."""
