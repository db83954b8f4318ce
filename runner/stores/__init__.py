"""Stores: what outlives a run and has several writers, each write a transaction: the memo
store (`memo`), the one review store of people's feedback (`reviews`), `runner serve`'s results
by content (`result_store`), both on SQLite or PostgreSQL through one connection (`database`,
which also opens the SQLite files several processes share), and what made a kept result,
checked before one is reused (`kept`)."""
