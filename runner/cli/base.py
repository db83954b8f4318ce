"""Where an error becomes an exit code, for every command of every command group: a RunnerError
its message and code, an interruption its own, and a command's own outcome (a failed gate, too
many errored items) the code it gives `fail`."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import typer
from typer.main import get_command_name
from typer.models import CommandFunctionType, CommandInfo

from runner.errors import RunnerError
from runner.redact import redact

FINISHED_ITEMS_WRITTEN = "finished items are written"


def user_errors(command: Callable[..., Any], interrupted: str = FINISHED_ITEMS_WRITTEN) -> Callable[..., Any]:
    """A RunnerError becomes its message on stderr and its exit code (2), and an
    interruption its own (Ctrl-C 130, SIGTERM 143), with what it left behind."""

    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except RunnerError as exc:
            typer.echo(redact(str(exc)), err=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt as stop:
            typer.echo(f"interrupted: {interrupted}", err=True)
            raise typer.Exit(getattr(stop, "exit_code", 130)) from None
    return guarded


def fail(message: str, code: int = 2) -> NoReturn:
    """End the command: `message` on stderr, exit `code`."""
    typer.echo(message, err=True)
    raise typer.Exit(code)


class RunnerApp(typer.Typer):
    """A typer app (or command group) whose every command maps errors through `user_errors`;
    `interrupted=` says what an interrupted command leaves behind."""

    def command(self, name: str | None = None, *, interrupted: str = FINISHED_ITEMS_WRITTEN,
                **kwargs: Any) -> Callable[[CommandFunctionType], CommandFunctionType]:
        register = super().command(name, **kwargs)

        def decorator(function: CommandFunctionType) -> CommandFunctionType:
            register(user_errors(function, interrupted))
            return function
        return decorator

    def narrowed_to(self, args: Sequence[str]) -> typer.Typer:
        """This app holding only the command (or command group) `args` starts with. Typer
        builds every command's parameters from their signatures at each start, and an
        invocation needs one. Anything else (no command, an option such as
        --help or --version, a name it does not know) gets the whole app, so help, the
        version and "No such command" read as before."""
        if not args or args[0].startswith("-"):
            return self
        commands = [info for info in self.registered_commands if _name(info) == args[0]]
        groups = [info for info in self.registered_groups if info.name == args[0]]
        if not commands and not groups:
            return self
        narrowed = copy.copy(self)
        narrowed.registered_commands, narrowed.registered_groups = commands, groups
        return narrowed


def _name(info: CommandInfo) -> str | None:
    if info.name:
        return info.name
    return get_command_name(info.callback.__name__) if info.callback is not None else None
