"""The command line: the typer app and one module per command group."""

from runner.cli.collector import importing

importing()       # set here, so that the command line's own imports gain too (collector.py)
