"""Running items: the step interpreter (`execute`), its per-run `Runtime` (`context`, with its
`RunRole`: who makes the run and where what it computes goes; it alone makes the LLM service)
and what it asks of that service (`services`, a Protocol, with the `CallRequest` steps send),
item selection, the checks before a run and of how it went (`health`), progress, run
warnings, jury voting and repeated samples, what a run tells as it unfolds (`observe`: the hooks
it calls for items, steps and LLM calls, tracing being one observer; and the items running now,
which a batch collector reads), the step types (`steps/`, one module each) and where items run
(`executors/`: this process, worker processes or Ray actors, the last two through one driver)."""
