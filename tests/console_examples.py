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
  answers, a run, a server or files a block needs), and each `env=NAME=VALUE` exports a
  variable. A setup may stand for a value the docs show (the address of a server it started
  on a free port): later commands get its real value.
- `session=NAME`: the blocks of one file naming the same session are one example, run in
  order in one copy, setup and shell (the first block's comment sets them up), so a block
  reads what an earlier one made.
- `output=json`: each command's output is compared as JSON (a document, or one per line),
  its strings normalised as below; `...` as a value stands for any value. A string the docs
  show that differs from the printed one only where they are normalised (a job id, a hash) is
  replaced by the printed one in the commands that follow.
- `retry=SECONDS`: a command whose output does not match yet is run again until it does, for
  at most that long (a command showing the end of something asynchronous, such as a job).
- `slow`: the example starts a server or worker processes; its test is marked slow, so the
  README's test command leaves it out and `python -m pytest -m slow` (and CI) runs it. Every
  example of a docs/ page is run that way too; README.md's run in the README's test command.
- Printed and shown text are both normalised before they are compared: run and job ids
  (20261122-131406, 20261127005135-ce46d5e3) read `<run>`, ISO times `<time>`, durations `N ms` / `N s`, ports of
  127.0.0.1 and localhost `PORT`, paths under a temporary folder `<tmp>`, hex hashes of 12 or
  more digits `<hash>`; progress lines (`[runner] ...`) and trailing spaces are dropped.
- `...` on a line of its own stands for any number of lines, and inside a line for any text
  (as doctest's ELLIPSIS)."""

from __future__ import annotations

import json
import queue
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import copy_example

REPO = Path(__file__).resolve().parent.parent
COPIED = ("pipelines", "prompts", "schemas", "probes", "examples", "tests")
MARK = "@@console-example-end@@"
_FENCE = re.compile(r"^(\s*)(```|~~~)")
_SETUP = re.compile(r"^\s*<!--\s*console:(?P<options>.*?)-->\s*$")
_ANY_VALUE = re.compile(r"(?<=[:\[,])(\s*)\.\.\.(?=\s*[,}\]])")       # `"key": ...` in JSON the docs show
_NORMALISE = [
    (re.compile(r"\b\d{8}-?\d{6}(?:-[0-9a-f]{3,8})?\b"), "<run>"),
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
    line: int
    expected: list[str] = field(default_factory=list)


@dataclass
class Example:
    file: str
    line: int
    commands: list[Command]
    cwd: str = "."
    setups: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    session: str = ""
    json: bool = False
    retry: float = 0.0
    slow: bool = False

    @property
    def name(self) -> str:
        return f"{self.file}:{self.line}"


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def examples(path: Path) -> Iterator[Example]:
    """The console examples of one Markdown file, in order (a session's blocks as one)."""
    sessions: dict[str, Example] = {}
    for example in _blocks(path):
        if not example.session:
            yield example
        elif example.session in sessions:
            sessions[example.session].commands += example.commands
        else:
            sessions[example.session] = example
    yield from sessions.values()


def _blocks(path: Path) -> Iterator[Example]:
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
    pending, pending_line = "", 0
    for number, line in enumerate(body, start + 1):
        if pending:
            pending += "\n" + line
        elif line.startswith("$ "):
            pending, pending_line = line[2:], number
        else:
            commands[-1].expected.append(line)
            continue
        if pending.endswith("\\"):
            continue
        commands.append(Command(pending, pending_line))
        pending = ""
    env = dict(value.partition("=")[::2] for value in options.get("env", []))
    setups = [name for value in options.get("setup", []) for name in value.split(",") if name]
    last = {key: values[-1] for key, values in options.items()}
    return Example(file, start + 1, commands, last.get("cwd") or ".", setups, env, last.get("session", ""),
                   last.get("output") == "json", float(last.get("retry") or 0), "slow" in options)


def copy_project(target: Path) -> Path:
    for folder in COPIED:
        copy_example(REPO / folder, target / folder)
    return target


def base_environment(home: Path) -> dict[str, str]:
    """What every example's bash starts from: this Python's `runner` first on PATH, no keys."""
    return {"PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
            "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", "COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


class Shell:
    """One bash for a whole example: its commands run one at a time (each with no stdin), so
    `cd`, `export` and `$?` carry over from one to the next."""

    def __init__(self, cwd: Path, env: dict[str, str]):
        self.process = subprocess.Popen(["bash"], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._send("__status=0")

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(MARK + "\n")          # bash ended: whatever was waited for is over

    def _send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()

    def run(self, command: str, timeout: float = 600) -> str:
        """What the command printed, stdout and stderr together."""
        self._send(f"(exit $__status)\n{{ {command}\n}} </dev/null 2>&1\n__status=$?\nprintf '\\n%s\\n' {MARK}")
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            if line.rstrip("\n") == MARK:
                return "".join(out).removesuffix("\n")
            out.append(line)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


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


def as_json(text: str, shown: bool = False) -> Any:
    """The JSON a command printed or the docs show (`...` as a value: any value); a text that
    is not JSON as itself."""
    text = _ANY_VALUE.sub(r'\1"..."', text.strip()) if shown else text.strip()
    try:
        return json.loads(text)
    except ValueError:
        try:
            return [json.loads(line) for line in text.splitlines()]
        except ValueError:
            return text


def same_json(shown: Any, printed: Any, carried: dict[str, str]) -> bool:
    """Whether the printed JSON is the shown one, strings compared normalised; each shown
    string that differs from its printed one is added to `carried` (shown -> printed)."""
    if shown == "...":
        return True
    if isinstance(shown, dict):
        return (isinstance(printed, dict) and shown.keys() == printed.keys()
                and all(same_json(value, printed[key], carried) for key, value in shown.items()))
    if isinstance(shown, list):
        return (isinstance(printed, list) and len(shown) == len(printed)
                and all(same_json(a, b, carried) for a, b in zip(shown, printed, strict=True)))
    if isinstance(shown, str) and isinstance(printed, str):
        if normalise(shown) != normalise(printed):
            return False
        if shown != printed:
            carried[shown] = printed
        return True
    return bool(shown == printed and type(shown) is type(printed))
