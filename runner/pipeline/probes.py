"""A pipeline's `probes:` (what `runner probe` measures), typed, and the checks its schema
cannot make: one perturbation per probe, a step field that names a step and a field of its
result, and a verdict to compare (summary.count_by)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.checks.result_shapes import fields_of
from runner.errors import ConfigError, did_you_mean
from runner.pipeline.files import named_file, read_located
from runner.yamlpos import Located
from runner.yamlpos import Path as DataPath

TRANSFORMS = ("inject", "perturb_number", "shuffle", "truncate", "case", "whitespace")
STEP_PREFIX = "steps."
DEFAULT_TOLERANCE = 0.1


def with_probe_file(located: Located, project_dir: Path) -> list[Path]:
    """`probes: FILE` replaced by that file's probes, each value located in it (so a wrong one
    is reported at the probe file's line); the file read, as a list (empty for inline probes).
    The path is relative to the project's probes/ folder, as a prompt's is to prompts/."""
    name = located.data.get("probes")
    if not isinstance(name, str):
        return []
    found, reason = named_file(project_dir / "probes" / "-", name, project_dir)
    if found is None:
        raise ConfigError([located.problem(("probes",), reason)])
    inner = read_located(found, "probe file")
    located.data["probes"] = inner.data
    for table, inner_table in ((located.value_pos, inner.value_pos), (located.key_pos, inner.key_pos)):
        table.update({("probes", *path): pos for path, pos in inner_table.items() if path})
    located.origins.update({("probes", *path): inner.file for path in inner.value_pos if path})
    located.value_pos[("probes",)] = inner.value_pos.get((), (1, 1))
    located.origins[("probes",)] = inner.file
    return [found]


@dataclass(frozen=True)
class Probe:
    name: str
    kind: str                          # one of TRANSFORMS
    field: str                         # as written: an item field (a.b), or steps.ID.FIELD
    options: dict[str, Any]            # the transform's other keys (verdict, wordings, keep, ...)
    expect: Any                        # "unchanged", "changed" or {"not": VALUE}
    variants: int = 1
    description: str = ""
    tolerance: float = DEFAULT_TOLERANCE    # how far a numeric vote may move before it is a flip

    @property
    def step(self) -> str | None:
        """The step whose result the probe perturbs, or None for an item field."""
        return self.field.split(".")[1] if self.field.startswith(STEP_PREFIX) else None

    @property
    def path(self) -> tuple[str, ...]:
        """The field's path in the item, or in the step's result."""
        parts = tuple(self.field.split("."))
        return parts[2:] if self.step is not None else parts

    def describe_expect(self) -> str:
        return f"not {self.expect['not']}" if isinstance(self.expect, dict) else str(self.expect)


def probes_of(data: Mapping[str, Any]) -> tuple[Probe, ...]:
    """The probes of a checked pipeline's data, in the file's order."""
    found = []
    for name, entry in (data.get("probes") or {}).items():
        kind = next(k for k in TRANSFORMS if k in entry)
        options = {k: v for k, v in entry[kind].items() if k != "field"}
        found.append(Probe(name, kind, entry[kind]["field"], options, entry["expect"], int(entry.get("variants", 1)),
                           entry.get("description", ""), float(entry.get("tolerance", DEFAULT_TOLERANCE))))
    return tuple(found)


def probe_problems(data: Mapping[str, Any], step_ids: Mapping[str, Any],
                   result_shape: Callable[[str], dict[str, Any]],
                   verdicts: list[str] | None = None) -> list[tuple[DataPath, str]]:
    """What is wrong with `probes:` beyond its schema, each with its place; `verdicts`: the
    values the verdict is known to take (an expectation that it does not become another
    can never fail)."""
    probes = data.get("probes")
    if not isinstance(probes, dict):
        return []
    problems: list[tuple[DataPath, str]] = []
    if not (data.get("summary") or {}).get("count_by"):
        problems.append((("probes",), "probes compare each copy's verdict with its original's: name the verdict "
                                      "field with summary.count_by"))
    for name, entry in probes.items():
        kinds = [k for k in TRANSFORMS if k in entry]
        if len(kinds) != 1:
            problems.append((("probes", name), f"a probe makes one perturbation ({', '.join(TRANSFORMS)}); this one "
                                               f"has {', '.join(kinds) if kinds else 'none'}"))
            continue
        expect = entry.get("expect")
        if verdicts and isinstance(expect, dict) and str(expect.get("not")) not in verdicts:
            problems.append((("probes", name, "expect", "not"),
                             f"the verdict ({data['summary']['count_by']}) is always one of {', '.join(verdicts)}: it "
                             f"never becomes {expect.get('not')!r}, so this expectation can never fail (expect one of "
                             "those)"))
        field = str(entry[kinds[0]]["field"])
        if field.startswith(STEP_PREFIX):
            problems += _step_field(field, (("probes", name, kinds[0], "field")), step_ids, result_shape)
    return problems


def _step_field(field: str, where: DataPath, step_ids: Mapping[str, Any],
                result_shape: Callable[[str], dict[str, Any]]) -> list[tuple[DataPath, str]]:
    parts = field.split(".")
    if len(parts) < 3:
        return [(where, f"'{field}': name a field of the step's result, steps.ID.FIELD")]
    step, name = parts[1], parts[2]
    if step not in step_ids:
        hint = did_you_mean(step, step_ids)
        return [(where, f"'{field}': no step has id '{step}'" + (f".{hint}" if hint else ""))]
    known = fields_of(result_shape(step))
    if known is not None and name not in known:
        hint = did_you_mean(name, known)
        return [(where, f"'{field}': step '{step}' has no field '{name}'"
                        + (f".{hint}" if hint else f" (its fields: {', '.join(sorted(known))})"))]
    return []
