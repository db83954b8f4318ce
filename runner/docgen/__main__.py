"""`python -m runner.docgen [--check] [PATH]`: write (or check) the pipeline language page."""

from __future__ import annotations

from runner.docgen import write_or_check
from runner.docgen.page import DOC_FILE, render_page


def main(argv: list[str] | None = None) -> int:
    return write_or_check(argv, DOC_FILE, lambda current: render_page(), "{}", "runner.docgen")


if __name__ == "__main__":
    raise SystemExit(main())
