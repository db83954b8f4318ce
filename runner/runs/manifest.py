"""run.json: how a run was made, enough to rebuild its exact command and to tell two runs apart
(the pipeline and its files by hash, the models, the input by content hash, the selection),
written when the run starts and when it ends. Never an API key: literal values under secret
names are redacted, URLs lose their user:password and secret query values."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from runner.checks.checker import verdict_values
from runner.errors import RunnerError
from runner.fileio import atomic_write
from runner.pipeline.model import Pipeline
from runner.pipeline.overrides import MODEL_FLAG
from runner.redact import SECRET_NAME
from runner.redact import strip_credentials as without_credentials
from runner.runs.folders import RUN_SCHEMA, input_identity, read_checked

MANIFEST = "run.json"
FORMAT = 1
REDACTED = "<redacted>"
_TEMPLATE_SUFFIXES = (".j2", ".jinja", ".jinja2", ".json", ".txt", ".md")
strip_credentials = partial(without_credentials, hidden=REDACTED)      # a URL as run.json shows it


def sha256_file(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def sha256_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def redact(value: Any, key: str = "") -> Any:
    """A copy with secrets taken out: literal values under secret-looking keys, URL credentials."""
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, key) for v in value]
    if isinstance(value, str):
        if key and SECRET_NAME.search(key) and "{{" not in value and value:
            return REDACTED
        return strip_credentials(value) if "://" in value else value
    return value


def redact_assignment(text: str) -> str:
    """`models.x.api_key=sk-...` -> `models.x.api_key=<redacted>` (a --set or a --record)."""
    name, sep, value = text.partition("=")
    if not sep:
        return text
    return f"{name}={redact(value, name.rsplit('.', 1)[-1])}"


def strings_in(value: Any, numbers: bool = False, keys: bool = False) -> Iterator[str]:
    """Every string in a value, however deep (with `numbers`, every number as text too; with
    `keys`, each object's keys too)."""
    if isinstance(value, (dict, list)):
        if keys and isinstance(value, dict):
            yield from (key for key in value if isinstance(key, str))
        for inner in value.values() if isinstance(value, dict) else value:
            yield from strings_in(inner, numbers, keys)
    elif isinstance(value, str):
        yield value
    elif numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
        yield str(value)


def used_files(pipeline: Pipeline) -> dict[str, str]:
    """sha256 of every other file the pipeline is made of (bases, parts, plugin files), every
    prompt and schema file it names and the templates they include, by path in the project."""
    found: dict[str, str] = {}
    plugin_files = [Path(spec) for spec in pipeline.plugins if spec.endswith(".py")]
    for source in [*pipeline.sources[1:], *plugin_files]:
        try:
            found[str(source.resolve().relative_to(pipeline.project_dir.resolve()))] = sha256_file(source)
        except (OSError, ValueError):
            continue
    pending: list[tuple[str, Path]] = []
    for text in set(strings_in(pipeline.located.data)):     # those that may name a file: one short line, no template
        if "{{" in text or "\n" in text or len(text) >= 300 or not text.endswith(_TEMPLATE_SUFFIXES):
            continue
        pending += [(f"prompts/{text}", pipeline.prompts_dir / text), (f"schemas/{text}", pipeline.schemas_dir / text)]
    while pending:
        name, path = pending.pop()
        if name in found or not path.is_file():
            continue
        try:
            found[name] = sha256_file(path)
        except OSError:
            continue
        if name.startswith("prompts/"):
            pending.extend((f"prompts/{included}", pipeline.prompts_dir / included)
                           for included in _included_templates(path))
    return dict(sorted(found.items()))


def _included_templates(path: Path) -> list[str]:
    import jinja2
    import jinja2.meta
    try:
        source = path.read_text(encoding="utf-8")
        parsed = jinja2.Environment().parse(source)
        return [name for name in jinja2.meta.find_referenced_templates(parsed) if isinstance(name, str)]
    except (OSError, UnicodeDecodeError, jinja2.TemplateError):
        return []


def shown_path(path: Path) -> str:
    """Relative to the working directory where it can be, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path.resolve())


def model_entries(model_spec: Any, names: list[str]) -> dict[str, Any]:
    """Each model as the run resolved it: provider/model, endpoint (no credentials), seat, sampling."""
    models: dict[str, Any] = {}
    for name in names:
        try:
            spec = model_spec(name)
        except RunnerError as exc:
            models[name] = {"error": str(exc)}
            continue
        models[name] = {"model": spec.model, "api_base": strip_credentials(spec.api_base) if spec.api_base else None,
                        "enabled": spec.enabled, "transport": spec.transport, "sampling": spec.sampling,
                        "structured_output": spec.structured_output}
    return models


def read_manifest(run_dir: Path) -> dict[str, Any] | None:
    """A run's run.json, each field runner reads type-checked; None for runs made before it existed."""
    return read_checked(run_dir / MANIFEST, RUN_SCHEMA)


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    atomic_write(run_dir / MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=2, default=str) + "\n")


def input_entry(input_path: Path | None, records: list[str], project_dir: Path, items: int,
                stdin_copy: Path | None = None) -> dict[str, Any]:
    """run.json's `input`: the file (standard input's content as its copy held it), or the records."""
    if input_path is None:
        return {"records": [redact_assignment(r) for r in records], "items": items,
                "sha256": sha256_json(records)}
    entry: dict[str, Any] = {"path": shown_path(input_path), "items": items}
    if stdin_copy is None:
        entry["in_project"] = input_identity(input_path, project_dir)
    else:
        entry["stdin"] = True
    content = stdin_copy or input_path
    try:
        entry["sha256"] = sha256_file(content)
        entry["bytes"] = os.path.getsize(content)
    except OSError:
        entry["sha256"] = None
    return entry


RESULT_NEUTRAL = ("tracing", "description")     # a pipeline's keys that no result depends on


def made_by_hash(pipeline: Pipeline, model_spec: Any) -> str:
    """What a kept result (serve's store, the memo store) was judged by: the resolved pipeline
    but what cannot change a result, the files it uses, and its models as they resolve here."""
    resolved = {k: v for k, v in redact(pipeline.located.data).items() if k not in RESULT_NEUTRAL}
    models = model_entries(model_spec, list(pipeline.models))
    return sha256_json({"pipeline": sha256_json(resolved), "files": used_files(pipeline), "models": models})[:16]


# What a --failed-from rerun may change and keep its parent's results: nothing a result depends on.
RERUN_NEUTRAL = (*RESULT_NEUTRAL, "summary", "probes", "memo", "concurrency", "env", "name", "params_schema",
                 "extends")
MODEL_NEUTRAL = ("api_key", "cache_as", "timeout", "retries", "backoff", "transport", "max_response_bytes", "batch",
                 "batch_max_requests", "batch_max_wait", "batch_poll_seconds", "batch_retry", "limits")
KEY_FILE = "run-key"        # in the cache folder: the key of run.json's digests of what judged the items


def _units(resolved: dict[str, Any]) -> dict[str, Any]:
    """A resolved pipeline as what judges its items, by unit (`params.NAME`, `models.NAME`, each
    other key): without RERUN_NEUTRAL's keys, each model without how it is reached (MODEL_NEUTRAL)."""
    units: dict[str, Any] = {}
    for key, value in resolved.items():
        if key in RERUN_NEUTRAL:
            continue
        if key not in ("params", "models") or not isinstance(value, dict):
            units[key] = value
            continue
        for name, entry in value.items():
            if key == "models" and isinstance(entry, dict):
                entry = {k: v for k, v in entry.items() if k not in MODEL_NEUTRAL}
            units[f"{key}.{name}"] = entry
    return units


def run_key(cache_dir: Path) -> bytes | None:
    """The cache folder's key for run.json's digests (32 random bytes, made on first use, its
    owner's alone); None where it can be neither read nor made (nothing is then digested)."""
    path = Path(cache_dir) / KEY_FILE
    for _ in range(2):
        try:
            key = path.read_bytes()
            return key if len(key) == 32 else None
        except FileNotFoundError:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            except FileExistsError:
                continue            # another run made it meanwhile: read it
            except OSError:
                return None
            with os.fdopen(fd, "wb") as handle:
                handle.write(secrets.token_bytes(32))
        except OSError:
            return None
    return None


def judging_digests(pipeline: Pipeline, key: bytes) -> dict[str, Any]:
    """Each unit of what judges the items as a keyed digest of its value as written, secrets
    included: run.json shows them redacted, and a change there (`params.keyword`, which reads as
    a secret's name) would pass unseen; no one without the cache's key can test a guess."""
    def digest(value: Any) -> str:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
        return hmac.new(key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:16]
    return {"key": digest("runner run key"), "units": {name: digest(value)
                                                       for name, value in _units(pipeline.located.data).items()}}


def judged_otherwise(earlier: dict[str, Any], pipeline: Pipeline, key: bytes | None) -> list[str]:
    """Where an earlier run (its run.json, `earlier`) judged otherwise than this pipeline would:
    each unit that differs (`params.NAME`, `models.NAME`, `steps`, ...; not what cannot change a
    result), by their keyed digests when both were made with this cache's `key`, else by the
    values run.json shows; and each file it uses that changed (prompts, schemas, bases)."""
    shown = earlier.get("pipeline") or {}
    digests = shown.get("judging")
    if key is not None and isinstance(digests, dict) and isinstance(digests.get("units"), dict) \
            and digests.get("key") == (now_digests := judging_digests(pipeline, key))["key"]:
        then, now = digests["units"], now_digests["units"]
    elif isinstance(shown.get("resolved"), dict):
        then = {name: sha256_json(value) for name, value in _units(shown["resolved"]).items()}
        now = {name: sha256_json(value) for name, value in _units(redact(pipeline.located.data)).items()}
    else:
        return []                       # a run.json older than these fields: nothing to compare
    differs = [name for name in sorted(set(then) | set(now)) if then.get(name) != now.get(name)]
    files, used = used_files(pipeline), shown.get("files") or {}
    differs += [f"{name} {'changed' if name in used and name in files else 'is new' if name in files else 'is gone'}"
                for name in sorted(set(files) | set(used)) if files.get(name) != used.get(name)]
    return differs


def pipeline_entry(pipeline: Pipeline, overrides: list[str], key: bytes | None = None) -> dict[str, Any]:
    resolved = redact(pipeline.located.data)
    try:
        file_hash: str | None = sha256_file(pipeline.file)
    except OSError:
        file_hash = None
    return {"name": pipeline.name, "file": shown_path(pipeline.file), "file_sha256": file_hash,
            "sets": [redact_assignment(o) for o in overrides if not o.startswith(MODEL_FLAG)],
            "models_given": [redact_assignment(o[len(MODEL_FLAG):]) for o in overrides if o.startswith(MODEL_FLAG)],
            "sha256": sha256_json(resolved), "files": used_files(pipeline), "verdicts": verdict_values(pipeline),
            "resolved": resolved, **({"judging": judging_digests(pipeline, key)} if key is not None else {})}
