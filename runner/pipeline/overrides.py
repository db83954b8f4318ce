"""`--set a.b.c=VALUE`: set any path the pipeline schema allows, VALUE parsed as YAML; and
`--model NAME=provider/model[@api_base]` (passed on as the text `--model NAME=...`), which
points a model of the pipeline somewhere else and seats it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from runner.errors import ConfigError, Problem, RunnerError, did_you_mean, unknown
from runner.pipeline.step_catalog import StepInfo
from runner.yamlpos import Located, load_value, where_and_why
from runner.yamlpos import Path as DataPath


def parse_assignment(text: str) -> tuple[list[str], Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise RunnerError(f"--set {text}: expected KEY=VALUE, e.g. --set params.quote_threshold=0.9")
    try:
        value = load_value(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise RunnerError(f"--set {text}: the value is not valid YAML: {where_and_why(exc, raw)[2]}") from None
    return key.strip().split("."), value


MODEL_FLAG = "--model "
_REMOVE = object()       # an assignment that deletes the key
# What the endpoint's own settings say about the old endpoint: a new one starts without them.
_ENDPOINT_KEYS = ("cache_as",)


def model_flag(text: str) -> list[tuple[list[str], Any]]:
    """The assignments of `--model NAME=provider/model[@api_base]`: the model string, its
    api_base (none: the provider's own endpoint, whose key comes from the provider's env
    var, so the old endpoint's api_key goes too), enabled. `@` starts the api_base only
    before http:// or https:// (a model string may hold an `@`, e.g. vertex_ai/x@001)."""
    name, sep, target = text.partition("=")
    name, target = name.strip(), target.strip()
    if not sep or not name or not target:
        raise RunnerError(f"{MODEL_FLAG}{text}: expected NAME=provider/model[@api_base], "
                          "e.g. --model judge=openai/gpt-4o-mini or --model local=openai/qwen@http://127.0.0.1:8080/v1")
    model, at, base = target.rpartition("@")
    if not at or not base.lower().startswith(("http://", "https://")) or not model:
        model, base = target, ""
    assignments: list[tuple[list[str], Any]] = [(["models", name, "model"], model),
                                                (["models", name, "api_base"], base or _REMOVE)]
    if not base:
        assignments.append((["models", name, "api_key"], _REMOVE))
    assignments += [(["models", name, key], _REMOVE) for key in _ENDPOINT_KEYS]
    return [*assignments, (["models", name, "enabled"], True)]


def apply_overrides(located: Located, assignments: list[str], schema: dict[str, Any],
                    infos: Mapping[str, StepInfo]) -> None:
    """Write each assignment into `located.data`, or raise ConfigError naming every bad path."""
    problems: list[Problem] = []
    for text in assignments:
        if text.startswith(MODEL_FLAG):
            label, writes = text, model_flag(text[len(MODEL_FLAG):])
        else:
            label, writes = f"--set {text}", [parse_assignment(text)]
        for parts, value in writes:
            try:
                path = _resolve(located.data, parts, schema, infos)
            except _BadPath as exc:
                problems.append(Problem(label, ".".join(parts[:2] if label == text else parts), str(exc),
                                        (10**9, 0)))
                break
            if _declared_string(located.data, path) and not isinstance(value, str) and label != text:
                value = text.partition("=")[2]      # `--set params.name=2024` to a string param: the text
            _write(located.data, path, value)
            located.overridden[path] = text
    if problems:
        raise ConfigError(problems)


def _declared_string(data: dict[str, Any], path: DataPath) -> bool:
    if len(path) != 2 or path[0] != "params":
        return False
    schema = (data.get("params_schema") or {}).get(path[1])
    return isinstance(schema, dict) and schema.get("type") == "string"


class _BadPath(Exception):
    pass


def _resolve(data: Any, parts: list[str], schema: dict[str, Any], infos: Mapping[str, StepInfo]) -> DataPath:
    """Check `parts` against the schema (and the file, for params, models and step ids)."""
    defs = schema.get("$defs", {})
    node: dict[str, Any] = schema
    current: Any = data
    path: list[str | int] = []
    for position, part in enumerate(parts):
        while "$ref" in node and node["$ref"].startswith("#/$defs/"):
            node = defs[node["$ref"].rsplit("/", 1)[1]]
        here = ".".join(parts[:position]) or "the pipeline"
        if path == ["steps"]:
            index = _step_index(current, part)
            path.append(index)
            current = current[index]
            node = defs["step"]
            continue
        if path and path[0] == "steps" and len(path) == 2 and part == "with":
            uses = current.get("uses") if isinstance(current, dict) else None
            path.append(part)
            current = current.get("with", {}) if isinstance(current, dict) else {}
            info = infos.get(uses) if isinstance(uses, str) else None
            node = info.schema if info is not None else {"type": "object"}
            continue
        if path in (["params"], ["models"]):
            known = list(current) if isinstance(current, dict) else []
            if part not in known:
                kind, listed = ("param", "params") if path == ["params"] else ("model", "defined")
                raise _BadPath(unknown(kind, part, known, listed))
        properties = node.get("properties", {})
        extra = node.get("additionalProperties", True)
        if part in properties:
            node = properties[part]
        elif isinstance(extra, dict):
            node = extra
        elif extra is False:
            hint = did_you_mean(part, properties)
            raise _BadPath(f"'{part}' is not a key of {here}.{hint}" if hint else
                           f"'{part}' is not a key of {here} (allowed: {', '.join(sorted(properties))})")
        else:
            node = {}
        path.append(part)
        current = current.get(part) if isinstance(current, dict) else None
    return tuple(path)


def _step_index(steps: Any, part: str) -> int:
    if not isinstance(steps, list):
        raise _BadPath("the pipeline has no steps list")
    if part.isdigit() and int(part) < len(steps):
        return int(part)
    ids = [s.get("id") for s in steps if isinstance(s, dict)]
    if part in ids:
        return ids.index(part)
    raise _BadPath(unknown("step id", part, [i for i in ids if i], "steps"))


def _write(data: dict[str, Any], path: DataPath, value: Any) -> None:
    target: Any = data
    for part in path[:-1]:
        if isinstance(target, list):
            target = target[part]  # type: ignore[index]
            continue
        if not isinstance(target.get(part), (dict, list)):
            target[part] = {}
        target = target[part]
    if value is _REMOVE:
        target.pop(path[-1], None)
    else:
        target[path[-1]] = value
