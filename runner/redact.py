"""Credentials in URLs never reach a message runner writes or prints.

A URL may carry `user:password@` (an MLflow tracking URI, a model's api_base, a search
endpoint), and third-party exception text quotes it, whole or only its password. `redact`
is applied where messages are made (run warnings, item errors, the CLI's error lines): it
replaces the user information of every URL in the text, and every password of a URL runner
was given (`remember_url`) or that an environment variable holds."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

HIDDEN = "***"
MIN_SECRET = 4                  # shorter credentials would mangle ordinary words
# scheme://USERINFO@ : the user information stops at the first character a host cannot follow.
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/@?#'\"<>\\]+@")

_remembered: set[str] = set()


def url_secrets(url: object) -> set[str]:
    """The password of a URL (as written and decoded), or its user name when it stands alone
    (`https://TOKEN@host`)."""
    text = str(url)
    if "@" not in text or "://" not in text:
        return set()
    try:
        parts = urlsplit(text.strip())
        password, user = parts.password, parts.username
    except ValueError:
        return set()
    secret = password if password else user if user and len(user) >= 8 else None
    if not secret:
        return set()
    return {value for value in (secret, unquote(secret)) if len(value) >= MIN_SECRET}


def remember_url(url: object) -> None:
    """Hide this URL's credentials from every later message, also where they appear alone."""
    _remembered.update(url_secrets(url))


def environment_secrets() -> frozenset[str]:
    """The passwords of the URLs the environment holds now."""
    found: set[str] = set()
    for value in os.environ.values():
        if "://" in value and "@" in value:
            found |= url_secrets(value)
    return frozenset(found)


def redact(text: str, environment: frozenset[str] | None = None) -> str:
    """`text` without URL credentials. `environment`: the environment's secrets read once
    (environment_secrets) by a caller that redacts every call of a run, rather than
    os.environ read again for each text."""
    if "@" in text:
        text = _URL_USERINFO.sub(rf"\1{HIDDEN}@", text)
    secrets = _remembered | (environment_secrets() if environment is None else environment)
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, HIDDEN)
    return text
