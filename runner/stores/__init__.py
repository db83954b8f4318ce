"""What persists across runs: the LLM and JSON caches, the memo store, run folders."""
