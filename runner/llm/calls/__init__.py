"""A run's LLM calls, one JSON line each in `<run folder>/calls.jsonl`.

Each line is one call as it was made (a cached call too: its messages and the cached
answer), with these fields:

- `item`: the item's index; `call`: `ITEM.N`, the item's Nth call, in the order they began;
- `step`: the id of the step that made it; `model`: its name under `models:` (the seat);
  `model_id`: the model string sent; `endpoint`: the server, without credentials;
- `key`: the cache key its answer is stored under;
- `messages`: as sent; `answer`: the answer's raw text (None when none came);
- `usage`: token counts; `attempts`: requests it took (0 when cached);
- `started`, `ended`: UTC times; `latency_ms`: their difference;
- `cached`: whether the answer came from the cache; `error`: why the call failed, or None.

The lines are appended in batches by the run's one writer (runner/llm/writer.py), so a
killed run keeps what was appended; they are in the order the calls ended. API keys and URL
credentials are taken out before a line is written. `runner calls RUN` prints them as text."""
