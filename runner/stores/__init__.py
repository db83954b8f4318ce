"""Stores: what outlives a run and has several writers, in SQLite (each write a transaction)."""
