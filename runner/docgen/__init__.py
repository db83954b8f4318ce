"""The reference generated from the code: docs/pipeline-language.md (`page`: the step registry
and the steps' schemas and arguments, the sandbox's filters, tests and globals with examples a
test runs, the names templates see, the input adapters) and ARCHITECTURE.md's package table
(`architecture`: the layers and each package's docstring). `python -m runner.docgen` and
`python -m runner.docgen.architecture` rewrite them; `--check` exits 1 when one is stale."""
