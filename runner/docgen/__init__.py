"""The reference generated from the code: docs/pipeline-language.md (`page`: the step registry
and the steps' schemas and arguments, the sandbox's filters, tests and globals with examples a
test runs, the names templates see, the input adapters) and ARCHITECTURE.md's package table
(`architecture`: the layers and each package's docstring). `python -m runner.docgen` and
`python -m runner.docgen.architecture` rewrite them; `--check` exits 1 when one is stale."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def write_or_check(argv: list[str] | None, default: Path, make: Callable[[str], str], what: str,
                   command: str) -> int:
    """`[--check] [PATH]`: rewrite PATH (default `default`) as `make` makes it from its text now;
    with --check, exit 1 when it is stale. `what` names it in the messages ({} is the path)."""
    args = list(sys.argv[1:] if argv is None else argv)
    paths = [a for a in args if a != "--check"]
    target = Path(paths[0]) if paths else default
    current = target.read_text(encoding="utf-8") if target.is_file() else ""
    page, shown = make(current), what.format(target)
    if "--check" in args:
        if current != page:
            print(f"{shown} is stale: run python -m {command}", file=sys.stderr)
            return 1
        print(f"{shown} is up to date")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    print(f"wrote {shown}")
    return 0
