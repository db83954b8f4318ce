"""What a run is asked to do: which items (ItemSource, with its Selection) and how (RunOptions).

Plain data from the command line or a Python caller; who makes the run and where what it
computes goes (a probe, a worker, `runner serve`) is runner/engine/context.py's RunRole."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runner.inputs import ItemStream


@dataclass
class Selection:
    """`--item N`, `--filter EXPR` and `--failed-from RUN` (runner/engine/selection.py applies them)."""

    item: int | None = None
    filter: str | None = None
    failed_from: Path | None = None


@dataclass
class ItemSource:
    """Where the items come from: `--input PATH` or `--record KEY=VALUE`s, then `--limit` and the selection."""

    input_path: Path | None = None
    records: list[str] = field(default_factory=list)
    limit: int | None = None
    selection: Selection = field(default_factory=Selection)
    input_items: int | None = None        # items in the input before selection (set by load_items)
    input_format: str | None = None       # `--input-format`: the adapter reading the input instead of the pipeline's
    input_name: str | None = None         # what the items' errors call the input when it is a copy (an upload's name)
    stdin_copy: Path | None = None        # `--input -`: standard input's temporary copy (set by load_items)
    # The run's items made from the selected ones by its caller: `runner probe` adds each
    # item's perturbed copies (runner/probe/measure.py).
    derive: Callable[[ItemStream], ItemStream] | None = None

    def discard_stdin_copy(self) -> None:
        if self.stdin_copy is not None:
            self.stdin_copy.unlink(missing_ok=True)
            self.stdin_copy = None


@dataclass
class RunOptions:
    cache_dir: Path = Path("cache")
    no_cache: bool = False
    llm_concurrency: int = 8
    concurrency_given: bool = False   # llm_concurrency came from --concurrency: it beats a local server's default
    out_dir: Path | None = None
    memo_dir: Path | None = None   # where a relative memo store lives (default: out_dir)
    input_path: str | None = None
    trace: str | None = None       # `--trace mlflow|none`: overrides the pipeline's tracing.backend
    fail_under: float | None = None                                 # checked before the run: needs a rate
    command_flags: list[str] = field(default_factory=list)         # CLI-only flags, for run.json's argv
    batch: bool = False            # `--batch`: every model with a batch API answers through it
    csv_raw: bool = False          # `--csv-raw`: results.csv cells as they are (no formula neutralising)
    group: Path | None = None      # where a run without --out gets its folder (default: the pipeline's and input's)
    # A sweep's calls known to fail (cache key: error): each fails with its error instead of being
    # sent, and a call that fails is added, so a sweep sends each missing call at most once.
    failed_calls: dict[str, str] | None = None
    # `--no-cache-as`: cache keys name each model's own endpoint, never its `cache_as` name.
    no_cache_as: bool = False
