"""`python -m runner.docgen [--check] [PATH]`: write (or check) the pipeline language page."""

from __future__ import annotations

import sys
from pathlib import Path

from runner.docgen.page import DOC_FILE, render_page


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    paths = [a for a in args if a != "--check"]
    target = Path(paths[0]) if paths else DOC_FILE
    page = render_page()
    if check:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current != page:
            print(f"{target} is stale: run python -m runner.docgen", file=sys.stderr)
            return 1
        print(f"{target} is up to date")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
