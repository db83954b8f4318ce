"""The command line: the typer app and one module per command group."""
