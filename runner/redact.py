"""Credentials never reach a message runner writes or prints: the one redaction.

One list of the names that mark a secret (`SECRET_NAME`), one minimum length of a secret found
by value (`MIN_SECRET`), and where a credential sits in text: a URL's `user:password@`, or an
assignment to a name ending with a secret word, its value bare or quoted (`?password=`,
`api_key=`, libpq's `password='...'`, a header `Api_Key: ...`). `redact`, applied where messages
are made, hides those and every secret a caller names, a URL runner was given holds
(`remember_url`) or an environment variable holds."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

HIDDEN = "***"
MEMO_CHARS = 2048          # texts redacted from a memo: no longer ones (a memo of big texts holds their memory)
MIN_SECRET = 8      # shorter values are dummies (`x`, `none`), and replacing them mangles ordinary words
DUMMY_SECRETS = frozenset({"no-key-needed", "sk-no-key-required", "not-needed", "lm-studio", "ollama", "none",
                           "dummy", "empty", "changeme", "sk-dummy", "sk-local"})
SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "auth", "authorization", "signature", "credential")
SECRET_NAME = re.compile("|".join(SECRET_WORDS), re.IGNORECASE)     # a name that holds a secret
# scheme://USERINFO@ : the user information stops at the first character a host cannot follow.
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/@?#'\"<>\\]+@")
# NAME=VALUE or NAME: VALUE where NAME ends with a secret word, in any case (`max_tokens=` does not):
# URL queries, libpq DSNs, environment lines, headers. The value is bare, 'quoted' (libpq: \' inside) or
# "quoted", after an optional `Bearer `. A quoted name (`"key": ...`) is JSON, a model's answer among
# others, which this must leave valid: a secret there is found by value.
_ASSIGNED = re.compile(rf"(?i)(?<![\w.\-])([\w.\-]*(?:{'|'.join(SECRET_WORDS)})"
                       r"(?:\s*=\s*|:[ \t]*)(?:bearer[ \t]+)?)"
                       r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s&#;'\"`<>,)]+)")
_PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*")     # `KEY=VALUE`, `KEY=V1,V2`: a usage message's, not a secret

_remembered: set[str] = set()


def is_secret(value: str) -> bool:
    """Long enough to be a credential, and not one of the dummy keys local servers take."""
    return len(value) >= MIN_SECRET and value.lower() not in DUMMY_SECRETS


def named_secrets(named: Mapping[str, str]) -> set[str]:
    """The values of the names that mark a secret (an environment, a model's settings)."""
    return {value for name, value in named.items()
            if isinstance(value, str) and SECRET_NAME.search(name) and is_secret(value)}


def url_secrets(url: object) -> set[str]:
    """The credentials of a URL (as written and decoded): its password, or its user name when
    it stands alone (`https://TOKEN@host`), and the values of its secret query parameters."""
    text = str(url)
    if "://" not in text:
        return set()
    try:
        parts = urlsplit(text.strip())
        password, user = parts.password, parts.username
    except ValueError:
        return set()
    found = [password if password else user if user else ""]
    found += [value for name, value in parse_qsl(parts.query) if SECRET_NAME.search(name)]
    return {value for secret in found for value in (secret, unquote(secret)) if is_secret(value)}


def assigned_secrets(text: str) -> set[str]:
    """The values assigned to secret names in `text` (libpq's `host=db password='...'`), unquoted."""
    return {value for match in _ASSIGNED.finditer(text) if is_secret(value := _unquoted(match[2]))}


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def _hide_assigned(match: re.Match[str]) -> str:
    """The assignment with its value hidden, unless the value is no secret: after `=`, a
    placeholder (`KEY=VALUE`); after `:`, which prose uses too (`unexpected token: 'end_of_block'`),
    a value that is not made like a credential (a secret's length, with a digit)."""
    name, value = match[1], _unquoted(match[2])
    if "=" in name:
        hidden = not (_PLACEHOLDER.fullmatch(value) and not is_secret(value))
    else:
        hidden = is_secret(value) and any(char.isdigit() for char in value)
    return name + HIDDEN if hidden else match[0]


def strip_credentials(url: str, hidden: str = HIDDEN) -> str:
    """The URL without user:password, its secret query values replaced by `hidden` (run.json, summaries, links)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return url
    if not parts.scheme or host is None:
        return url
    netloc = host if ":" not in host else f"[{host}]"
    with contextlib.suppress(ValueError):
        netloc += f":{parts.port}" if parts.port else ""
    query = parts.query
    if query:
        query = urlencode([(k, hidden if SECRET_NAME.search(k) else v)
                           for k, v in parse_qsl(query, keep_blank_values=True)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def remember_url(url: object) -> None:
    """Hide this URL's (or libpq keyword string's) credentials from every later message, also where they stand alone."""
    _remembered.update(url_secrets(url) | assigned_secrets(str(url)))


def remember(secret: str) -> None:
    """Hide this secret from every later message (a DSN's password as its driver read it: a
    bare libpq value runs to the next space, `#`, `;` and `,` included)."""
    if is_secret(secret):
        _remembered.add(secret)


def environment_secrets() -> frozenset[str]:
    """The credentials of the URLs the environment holds now (the values of its secret names
    are hidden by the callers that read them: `named_secrets` of a run's env)."""
    return frozenset(secret for value in os.environ.values() if "://" in value for secret in url_secrets(value))


def redact(text: str, environment: frozenset[str] | None = None, secrets: Iterable[str] = ()) -> str:
    """`text` without credentials. `environment`: the environment's secrets, read once by a caller
    that redacts many texts (environment_secrets); `secrets`: more values to hide (a model's key)."""
    known = _known(environment, secrets)
    return _redacted(text, known) if len(text) <= MEMO_CHARS else _redact(text, known)


def _redact(text: str, known: tuple[str, ...]) -> str:
    text = _hidden(text, known)     # first: a known secret is hidden whole, whatever it holds
    if "@" in text:
        text = _URL_USERINFO.sub(rf"\1{HIDDEN}@", text)
    if "=" in text or ":" in text:
        text = _ASSIGNED.sub(_hide_assigned, text)
    return text


_redacted = lru_cache(maxsize=256)(_redact)     # the same short text again and again: a call's endpoint


def hide_secrets(text: str, environment: frozenset[str] | None = None, secrets: Iterable[str] = ()) -> str:
    """`text` with every secret runner knows hidden by value only: for what a model wrote or was
    sent, which the structural rules would rewrite (`primary key = user_id` stays as written)."""
    return _hidden(text, _known(environment, secrets))


def _hidden(text: str, known: tuple[str, ...]) -> str:
    for secret in known:
        if secret in text:
            text = text.replace(secret, HIDDEN)
    return text


def _known(environment: frozenset[str] | None, secrets: Iterable[str]) -> tuple[str, ...]:
    """Every secret known now, longest first."""
    return _in_order(len(_remembered), environment_secrets() if environment is None else environment, tuple(secrets))


@lru_cache(maxsize=64)      # sorted once a set of secrets, not for each text (the remembered only grow)
def _in_order(remembered: int, environment: frozenset[str], secrets: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(_remembered | environment | set(secrets), key=len, reverse=True))
