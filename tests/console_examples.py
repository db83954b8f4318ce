"""Console examples of the docs, found, run and compared (tests/test_docs_console.py runs them).

The format, for whoever writes docs:

- A console example is a block of README.md or docs/*.md (fenced with ``` or ~~~, or
  indented by four spaces) whose first non-blank line starts with `$ `. A block of commands
  without `$ ` (install lines, a command to copy) is not one and is never run.
- Each `$ ` line is a command (a line ending in a backslash goes on with the next line). The
  lines after it, up to the next `$ ` line or the end of the block, are what it prints,
  stdout and stderr together. `$ echo $?` shows the previous command's exit code.
- The commands of a block run one after the other in one bash, in a fresh copy of the
  repository's pipelines/, prompts/, schemas/, examples/ and tests/ (so `cd`, `export` and `$?` carry
  over), with `runner` and `python` of the test environment first on PATH and no API keys.
- An HTML comment right before the block (blank lines between are fine) sets it up:

      <!-- console: cwd=examples/citation_judge setup=local_model env=NAME=VALUE -->

  `cwd=` is where the first command runs (relative to the copy's root), `setup=` names one or
  more setups (comma-separated) of tests/test_docs_console.py (a scripted model with named
  answers, a run or files a block needs), and each `env=NAME=VALUE` exports a variable.
- Printed and shown text are both normalised before they are compared: run ids
  (20261122-131406) read `<run>`, ISO times `<time>`, durations `N ms` / `N s`, ports of
  127.0.0.1 and localhost `PORT`, paths under a temporary folder `<tmp>`, hex hashes of 12 or
  more digits `<hash>`; progress lines (`[runner] ...`) and trailing spaces are dropped.
- `...` on a line of its own stands for any number of lines, and inside a line for any text
  (as doctest's ELLIPSIS)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COPIED = ("pipelines", "prompts", "schemas", "examples", "tests")
MARK = "@@console-example-end@@"
_FENCE = re.compile(r"^(\s*)(```|~~~)")
_SETUP = re.compile(r"^\s*<!--\s*console:(?P<options>.*?)-->\s*$")
_NORMALISE = [
    (re.compile(r"\b\d{8}-\d{6}(?:-\d{3})?\b"), "<run>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2})?"), "<time>"),
    (re.compile(r"\b\d+ ms\b"), "N ms"),
    (re.compile(r"\b\d+\.\d+ s\b"), "N s"),
    (re.compile(r"\b(127\.0\.0\.1|localhost):\d+"), r"\1:PORT"),
    (re.compile(r"(?:/tmp|/var/folders|/private/var/folders)/[^\s'\"),]*"), "<tmp>"),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b"), "<hash>"),
]


@dataclass
class Command:
    text: str
    expected: list[str] = field(default_factory=list)


@dataclass
class Example:
    file: str
    line: int
    commands: list[Command]
    cwd: str = "."
    setups: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.file}:{self.line}"


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def examples(path: Path) -> Iterator[Example]:
    """The console examples of one Markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    name = path.relative_to(REPO).as_posix()
    number = 0
    while number < len(lines):
        fence = _FENCE.match(lines[number])
        if fence:
            end = next((n for n in range(number + 1, len(lines))
                        if lines[n].strip().startswith(fence.group(2))), len(lines))
            body = [line[len(fence.group(1)):] for line in lines[number + 1:end]]
            start, after = number + 1, end + 1
        elif lines[number].startswith("    ") and (number == 0 or not lines[number - 1].strip()):
            end = number
            while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
                end += 1
            body = [line[4:] for line in lines[number:end]]
            start, after = number, end
        else:
            number += 1
            continue
        found = _example(name, start, body, _options(lines, number))
        if found is not None:
            yield found
        number = after


def _options(lines: list[str], number: int) -> dict[str, list[str]]:
    """The `<!-- console: ... -->` comment before line `number`, as key -> values."""
    before = number - 1
    while before >= 0 and not lines[before].strip():
        before -= 1
    match = _SETUP.match(lines[before]) if before >= 0 else None
    options: dict[str, list[str]] = {}
    for word in shlex.split(match.group("options")) if match else []:
        key, _, value = word.partition("=")
        options.setdefault(key, []).append(value)
    return options


def _example(file: str, start: int, body: list[str], options: dict[str, list[str]]) -> Example | None:
    while body and not body[-1].strip():
        body.pop()
    first = next((line for line in body if line.strip()), "")
    if not first.startswith("$ "):
        return None
    commands: list[Command] = []
    pending = ""
    for line in body:
        if pending:
            pending += "\n" + line
        elif line.startswith("$ "):
            pending = line[2:]
        else:
            commands[-1].expected.append(line)
            continue
        if pending.endswith("\\"):
            continue
        commands.append(Command(pending))
        pending = ""
    env = dict(value.partition("=")[::2] for value in options.get("env", []))
    setups = [name for value in options.get("setup", []) for name in value.split(",") if name]
    return Example(file, start + 1, commands, (options.get("cwd") or ["."])[-1], setups, env)


def copy_project(target: Path) -> Path:
    for folder in COPIED:
        shutil.copytree(REPO / folder, target / folder,
                        ignore=shutil.ignore_patterns("cache", "reports", "__pycache__", "*.pyc"))
    return target


def base_environment(home: Path) -> dict[str, str]:
    """What every example's bash starts from: this Python's `runner` first on PATH, no keys."""
    return {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
            "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", "COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def run_example(example: Example, root: Path, env: dict[str, str], timeout: float = 600) -> list[str]:
    """What each command printed, in order (one bash for the whole block)."""
    script = ["exec 2>&1", f"cd {shlex.quote(str(root / example.cwd))}", "__status=0"]
    for name, value in example.env.items():
        script.append(f"export {name}={shlex.quote(value)}")
    for command in example.commands:
        script += ["(exit $__status)", command.text, "__status=$?", f"printf '\\n%s\\n' {MARK}"]
    done = subprocess.run(["bash", "-c", "\n".join(script)], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    outputs = done.stdout.split(f"\n{MARK}\n")
    return [chunk for chunk in outputs[:len(example.commands)]]


def normalise(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        if line.startswith("[runner] "):
            continue
        for pattern, replacement in _NORMALISE:
            line = pattern.sub(replacement, line)
        out.append(line.rstrip())
    while out and not out[-1]:
        out.pop()
    while out and not out[0]:
        out.pop(0)
    return out


def matches(expected: list[str], printed: list[str]) -> bool:
    """Whether the printed lines are the expected ones, `...` standing for any lines or text."""
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append("[^\\n]*?".join(re.escape(piece) for piece in line.split("...")) + r"\n")
    return re.fullmatch("".join(parts), "".join(line + "\n" for line in printed)) is not None
