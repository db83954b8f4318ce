"""The command line: the typer app (`app`: run and render) and one module per command group.
`base` turns every RunnerError and interruption into its message and exit code for every
command; a command's own outcome (a failed gate, too many errored items, invalid pipelines)
is the exit code that command raises."""
