"""What a request gets wrong, with the HTTP status that says so."""

from __future__ import annotations


class ApiError(Exception):
    """A client's mistake (4xx) or an unavailable part of the server (503): its message is
    the JSON body's `error`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message
