"""probe.json, probe.md and probe.html of a probe run: one table of every probe's flip and
failure rates (the final verdict's and each juror's), and per juror a bar chart of its
failure rate per probe with the interval."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from runner.calibration.eval_report import html_page, table
from runner.fileio import atomic_write, dumps

BAR = "#cf222e"
CLEAN = "#1a7f37"


def rate_text(rate: float | None, interval: list[float] | None) -> str:
    if rate is None:
        return "-"
    return f"{rate:.3f}" + (f" ({interval[0]:.3f}-{interval[1]:.3f})" if interval else "")


def row_note(row: dict[str, Any]) -> str:
    """What a row's numbers are over, beyond its n: a numeric vote's tolerance and rule, the
    pairs left unjudged and why."""
    notes = []
    if row.get("vote") == "numeric":
        notes.append(f"numeric vote: a flip moves it by more than {row.get('tolerance')}; `not` and `changed` "
                     "through the pipeline's verdict with this vote")
    if row.get("unjudged"):
        notes.append(f"{row['unjudged']} pair(s) unjudged: {row.get('unjudged_why')}")
    return "; ".join(notes)


def probe_markdown(report: dict[str, Any]) -> str:
    rows = [[p["name"], p["expect"], row["who"], row["n"], row["flips"], rate_text(row["flip_rate"], row["flip_ci95"]),
             row["failures"], rate_text(row["failure_rate"], row["failure_ci95"]), row_note(row)]
            for p in report["probes"] for row in p["rows"]]
    out = [f"# Probes of {report['pipeline']} on {report['input']}\n",
           f"{report['items']} item(s) and {report['copies']} perturbed cop{'y' if report['copies'] == 1 else 'ies'} "
           f"in run {report['run']}{' (interrupted: the pairs that finished)' if report.get('interrupted') else ''}. "
           f"A flip is a copy whose verdict (`{report['verdict_field']}`, or a juror's vote) differs from its "
           f"original's; a failure is what a robust judge does not do (`expect`). Rates are over n pairs, with "
           "a 95% Wilson interval.\n",
           table(["probe", "expect", "who", "n", "flips", "flip rate (95% CI)", "failures",
                  "failure rate (95% CI)", "note"], rows)
           if rows else "No pair of an original and its copy was judged.\n",
           "## Copies\n"]
    for probe in report["probes"]:
        line = (f"- `{probe['name']}`: {probe['transform']} `{probe['field']}`, {probe['copies']} cop"
                f"{'y' if probe['copies'] == 1 else 'ies'}, {probe['not_applicable']} with nothing to perturb, "
                f"{probe['errored']} errored")
        example = probe.get("example")
        if example:
            line += f"; input item {example['item']}: {_quoted(example['before'])} became {_quoted(example['after'])}"
        out.append(line)
    return "\n".join(out) + "\n"


def _quoted(text: str) -> str:
    return "`" + " ".join(text.replace("`", "'").split()) + "`"


def bar_chart(who: str, probes: list[dict[str, Any]]) -> str:
    """Failure rate per probe (bars) with its interval (whiskers) and n, 0 to 1."""
    bars = [(p["name"], next((r for r in p["rows"] if r["who"] == who), None)) for p in probes]
    step, left, top, plot_h = 112, 44, 30, 150
    width, height = left + step * len(bars) + 16, top + plot_h + 64
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'font-family="system-ui, sans-serif"><title>{html.escape(who)}: failure rate per probe</title>',
             f'<text x="{left}" y="16" font-size="13">{html.escape(who)}: failure rate per probe (95% CI)</text>']
    for tick in (0.0, 0.5, 1.0):
        y = top + plot_h * (1 - tick)
        parts += [f'<line x1="{left}" y1="{y:.1f}" x2="{width - 16}" y2="{y:.1f}" stroke="#d0d7de"/>',
                  f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{tick:.1f}</text>']
    for n, (name, row) in enumerate(bars):
        x = left + step * n + 26
        label_y = top + plot_h + 14
        parts.append(f'<text x="{x + 30}" y="{label_y}" font-size="10" text-anchor="middle">'
                     f'{html.escape(name if len(name) <= 20 else name[:19] + "…")}</text>')
        if row is None or row["failure_rate"] is None:
            parts.append(f'<text x="{x + 30}" y="{label_y + 14}" font-size="10" text-anchor="middle" '
                         f'fill="#57606a">no pairs</text>')
            continue
        rate = row["failure_rate"]
        y = top + plot_h * (1 - rate)
        color = BAR if rate > 0 else CLEAN
        parts.append(f'<rect x="{x}" y="{y:.1f}" width="60" height="{max(plot_h * rate, 1.5):.1f}" fill="{color}" '
                     f'fill-opacity="0.75"><title>{html.escape(name)}: {rate:.3f}</title></rect>')
        if row["failure_ci95"]:
            low, high = (top + plot_h * (1 - v) for v in row["failure_ci95"])
            parts += [f'<line x1="{x + 30}" y1="{low:.1f}" x2="{x + 30}" y2="{high:.1f}" stroke="#1f2328"/>',
                      f'<line x1="{x + 22}" y1="{low:.1f}" x2="{x + 38}" y2="{low:.1f}" stroke="#1f2328"/>',
                      f'<line x1="{x + 22}" y1="{high:.1f}" x2="{x + 38}" y2="{high:.1f}" stroke="#1f2328"/>']
        parts.append(f'<text x="{x + 30}" y="{label_y + 14}" font-size="10" text-anchor="middle" fill="#57606a">'
                     f'{rate:.2f}, n={row["n"]}</text>')
    parts.append("</svg>")
    return "".join(parts)


def write_probe(folder: Path, report: dict[str, Any]) -> None:
    text = probe_markdown(report)
    charts = [bar_chart(who, report["probes"]) for who in ("verdict", *report["jurors"])]
    atomic_write(folder / "probe.json", dumps(report) + "\n")
    atomic_write(folder / "probe.md", text)
    atomic_write(folder / "probe.html", html_page(f"probes of {report['pipeline']}", text, charts,
                                                  "<h2>Failure rate per probe</h2>\n"))
