"""Stores: what outlives a run and may have several writers at once (SQLite databases)."""
