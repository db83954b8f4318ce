"""Stores: what outlives a run and has several writers, each write a transaction: the memo
store (`memo`, `memo_sqlite`), the one review store of people's feedback (`reviews`: SQLite, or
PostgreSQL beside serve's results), `runner serve`'s results by content (`result_store`: SQLite
or PostgreSQL), what made a kept result, checked before one is reused (`kept`), and SQLite
files shared between processes (`shared_sqlite`)."""
