"""Stores: what outlives a run and has several writers, each write a transaction: the memo
store (`memo`), the one review store of people's feedback (`reviews`), `runner serve`'s results
by content (`result_store`), both on SQLite or PostgreSQL through one connection (`database`),
what made a kept result, checked before one is reused (`kept`), and SQLite files shared
between processes (`shared_sqlite`)."""
