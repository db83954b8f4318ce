"""eval.md, the eval section of report.html, sweep.md and sweep.html (with inline SVG line
charts), and the markdown tables and page shell the other reports (diff, probe, align) use."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from runner.calibration.metrics import interval_text
from runner.fileio import atomic_write, dumps
from runner.outputs.report_format import count_label
from runner.outputs.report_html import STYLE

SECTION = re.compile(r"\n?<!-- runner eval -->.*?<!-- /runner eval -->\n?", re.DOTALL)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list):
        return "[" + ", ".join(_cell(v) for v in value) + "]"
    return str(value).replace("|", "\\|")


def table(headers: list[str], rows: list[list[Any]], cell: Callable[[Any], str] = _cell) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _problems(report: dict[str, Any]) -> str:
    out = []
    for name, value in report["problems"].items():
        if value:
            shown = value if isinstance(value, list) else [f"{k} ({v})" for k, v in value.items()]
            text = ", ".join(str(v if not isinstance(v, dict) else f"{v['key']}: {v['error']}") for v in shown[:20])
            out.append(f"- {name.replace('_', ' ')} ({len(value)}): {text}{' ...' if len(value) > 20 else ''}")
    return "\n".join(out) + "\n" if out else "- none\n"


def _scores(m: dict[str, Any]) -> list[Any]:
    """Accuracy, balanced accuracy and kappa, each with its interval, then macro F1."""
    return [*(cell for name in ("accuracy", "balanced_accuracy", "kappa")
              for cell in (m.get(name), interval_text(m.get(f"{name}_ci95"), m["n"]))), m.get("macro_f1")]


def _numeric(m: dict[str, Any]) -> list[Any]:
    return [m["n"], m.get("mae"), m.get("bias"), m.get("pearson"), m.get("spearman")]


def _categorical(m: dict[str, Any]) -> str:
    """The agreement section, or the pass/fail one when `m` was scored as pass/fail."""
    title = f"Pass/fail (pass: {', '.join(m['positive'])})" if m.get("positive") else "Agreement"
    if not m.get("n"):
        return f"## {title}\n\nNothing to score.\n"
    base = m["baseline"]
    out = [f"## {title}\n",
           table(["", "accuracy", "accuracy 95% CI", "balanced accuracy", "balanced 95% CI", "kappa",
                  "kappa 95% CI", "macro F1"],
                 [["judge", *_scores(m)],
                  [f"always {base['predicts']}", base["accuracy"], None, base.get("balanced_accuracy"), None,
                   base["kappa"], None, base["macro_f1"]]]),
           "\nConfusion matrix (rows: label, columns: judge):\n",
           table(["label \\ judge", *m["classes"]],
                 [[c, *row] for c, row in zip(m["classes"], m["confusion"]["rows_truth_columns_predicted"],
                                              strict=True)]),
           "\n",
           table(["class", "precision", "recall", "F1", "support"],
                 [[c, v["precision"], v["recall"], v["f1"], v["support"]] for c, v in m["per_class"].items()])]
    return "\n".join(out)


def eval_markdown(report: dict[str, Any]) -> str:
    out = [f"# Evaluation against {report['labels']}\n",
           f"Key `{report['key']}`, label `{report['truth']}`, judge `{report['predicted']}` ({report['kind']}): "
           f"{report['scored']} scored of {report['label_rows']} label rows and {report['results']} results.\n",
           "## Join problems\n", _problems(report)]
    m = report["metrics"]
    if report["kind"] == "numeric":
        out += ["## Numeric agreement\n", table(["n", "MAE", "bias", "Pearson", "Spearman"], [_numeric(m)])]
    else:
        out.append(_categorical(m))
    if report.get("by"):
        out.append(by_markdown(report["by"], report["kind"]))
    if report.get("binary"):
        out.append(_categorical(report["binary"]))
    jurors = report.get("jurors")
    if jurors and not jurors["models"]:
        out.append(f"## Jurors\n\nNo per-juror scores: {jurors.get('missing') or 'no juror was scored'}.\n")
    elif jurors:
        out += [f"## Jurors\n\nEach juror's own answer ({', '.join(jurors['fields'])}) against the labels, "
                f"on items labelled {', '.join(jurors['labels_in_scope'])}.\n",
                table(["juror", "n", "accuracy", "kappa", "kappa 95% CI", "macro F1", "no vote", "calls", "cost"],
                      [[name, j["n"], j["accuracy"], j["kappa"], interval_text(j["kappa_ci95"], j["n"]),
                        j["macro_f1"], j["no_vote"], j.get("calls"), j.get("cost")]
                       for name, j in jurors["models"].items()])]
    if jurors and jurors.get("independence"):
        out.append(_independence(jurors["independence"]))
    if report.get("stability"):
        s = report["stability"]
        out += [f"## Stability\n\nItems whose repeated samples all agreed (`{s['field']}` 1.0) and the others.\n",
                table(["items", "n", "accuracy"], [[name, s[name]["n"], s[name]["accuracy"]]
                                                   for name in ("stable", "unstable")])]
    return "\n".join(out)


def by_markdown(by: dict[str, Any], kind: str) -> str:
    """`--by FIELD`: one row per slice, each metric with its n and 95% interval."""
    if kind == "numeric":
        rows = [[name, *_numeric(m)] for name, m in by["slices"].items()]
        return f"## By {by['field']}\n\n" + table([by["field"], "n", "MAE", "bias", "Pearson", "Spearman"], rows)
    rows = [[name, m["n"], *_scores(m), (m.get("baseline") or {}).get("accuracy")] for name, m in by["slices"].items()]
    return (f"## By {by['field']}\n\nEvery metric per value of `{by['field']}`, with 95% bootstrap intervals "
            "(n/a: too few items, or one class).\n\n"
            + table([by["field"], "n", "accuracy", "95% CI", "balanced accuracy", "95% CI", "kappa", "95% CI",
                     "macro F1", "always-majority accuracy"], rows))


def _independence(found: dict[str, Any]) -> str:
    out = ["## Juror independence\n",
           f"Correlation of the jurors' errors against the labels (phi, over the items both voted on); effective "
           f"independent votes {_cell(found['effective_votes'])} of {len(found['jurors'])}: "
           f"{found['formula']}, mean r {_cell(found['mean_error_correlation'])}.\n",
           table(["jurors", "n", "errors", "error correlation"],
                 [[" & ".join(p["jurors"]), p["n"], " / ".join(map(str, p["errors"])), p["correlation"]]
                  for p in found["pairs"]])]
    out += [f"- warning: {w}" for w in found["warnings"]]
    return "\n".join(out) + "\n"


def markdown_to_html(text: str) -> str:
    """Our markdown as HTML (markdown-it-py, with tables; raw HTML in the text is escaped)."""
    from markdown_it import MarkdownIt
    return str(MarkdownIt("commonmark", {"html": False}).enable("table").render(text))


def with_section(page: str, body_html: str) -> str:
    """report.html with the eval section replaced or added at the end of the page's container
    (its <main>, so it reads in the report's style), else just before </body>."""
    section = f"<!-- runner eval -->\n<section id=\"eval\">\n{body_html}\n</section>\n<!-- /runner eval -->\n"
    page = SECTION.sub("\n", page)
    at = page.lower().rfind("</main>")
    at = at if at >= 0 else page.lower().rfind("</body>")
    return page[:at] + section + page[at:] if at >= 0 else page + section


CHART_STYLE = ".charts{display:flex;flex-wrap:wrap;gap:1rem}.chart{margin:0;border:1px solid var(--line);" \
              "border-radius:8px;padding:.5rem;background:#fff}"
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"]
DASHES = ["", "6 3", "2 3", "8 3 2 3", "1 4", "10 4"]


def svg_plot(title: str, xs: list[str], lines: dict[str, list[float | None]], y_label: str) -> str:
    """A small line chart: one line per series over the x values (evenly spaced). Series that
    coincide stay visible: each has its own dash pattern, earlier ones drawn wider beneath, and
    marker shapes alternate; the legend and the x labels get the room their text needs."""
    names = [name or "all" for name in lines]
    legend_w = 24 + 6 * max((len(n) for n in names), default=3)
    crowded = len(xs) > 1 and max(len(x) for x in xs) * 6 > 380 / len(xs)
    width, left, top, right = 380 + legend_w + 48, 48, 28, legend_w + 16
    bottom = 36 + (4 * max(len(x) for x in xs) if crowded and xs else 0)
    height = max(240, top + bottom + 176, top + 18 * len(names) + 10)
    values = [v for series in lines.values() for v in series if v is not None]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    if high - low < 1e-9:
        low, high = low - 0.5, high + 0.5
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(i: int) -> float:
        return left + (plot_w * i / (len(xs) - 1) if len(xs) > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h * (1 - (v - low) / (high - low))

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'font-family="system-ui, sans-serif">',
             f'<text x="{left}" y="16" font-size="13">{html.escape(title)}</text>',
             f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#888"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#888"/>',
             f'<text x="{left - 4}" y="{top + 4}" font-size="10" text-anchor="end">{high:.2f}</text>',
             f'<text x="{left - 4}" y="{top + plot_h}" font-size="10" text-anchor="end">{low:.2f}</text>',
             f'<text x="12" y="{top + plot_h / 2}" font-size="10" text-anchor="middle" '
             f'transform="rotate(-90 12 {top + plot_h / 2})">{html.escape(y_label)}</text>']
    for i, label in enumerate(xs):
        at = f'x="{x(i):.1f}" y="{top + plot_h + 14}"'
        turn = f' text-anchor="end" transform="rotate(-40 {x(i):.1f} {top + plot_h + 14})"' if crowded \
            else ' text-anchor="middle"'
        parts.append(f'<text {at} font-size="10"{turn}>{html.escape(label)}</text>')
    for n, (name, series) in enumerate(zip(names, lines.values(), strict=True)):
        color, dash = COLORS[n % len(COLORS)], DASHES[n % len(DASHES)]
        stroke = max(4.5 - 1.0 * n, 1.5)
        points = [(x(i), y(v)) for i, v in enumerate(series) if v is not None]
        if len(points) > 1:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="{stroke}" stroke-opacity="0.85" '
                         f'stroke-dasharray="{dash}" points="{path}"/>')
        parts += [f'<rect x="{px - 3:.1f}" y="{py - 3:.1f}" width="6" height="6" fill="none" stroke="{color}"/>'
                  if n % 2 else f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{color}"/>' for px, py in points]
        legend_y = top + 12 + 18 * n
        parts.append(f'<line x1="{left + plot_w + 8}" y1="{legend_y - 4}" x2="{left + plot_w + 24}" '
                     f'y2="{legend_y - 4}" stroke="{color}" stroke-width="2" stroke-dasharray="{dash}"/>')
        parts.append(f'<text x="{left + plot_w + 28}" y="{legend_y}" font-size="10" fill="{color}">'
                     f'{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def waiting_text(setting: dict[str, Any]) -> str:
    """What a setting the cache cannot score waits for: its LLM calls, else (a search request,
    which render does not count) how many items reached one."""
    if setting.get("calls_needed"):
        return f"needs {setting['calls_needed']} call(s)"
    return f"{setting.get('items_waiting', 0)} item(s) need requests the cache does not hold"


def sweep_markdown(report: dict[str, Any]) -> str:
    keys = list(report["grid"])
    metric = report["metric"]
    shown = [metric, *(m for m in ("kappa", "accuracy") if m != metric)]
    rows = []
    for s in report["settings"]:
        if s["status"] == "needs_calls":
            rows.append([*s["set"].values(), *[None] * len(shown), None, None,
                         f"{waiting_text(s)}: run with --allow-calls"])
            continue
        counts = ", ".join(f"{count_label(str(k))} {v}" for k, v in s["counts"].items())
        rows.append([*s["set"].values(), s["metric"], *(s[m] for m in shown[1:]), s["scored"], s.get("errors", 0),
                     counts + (" (new calls made)" if s["status"] == "ran" else "")])
    out = [f"# Sweep of {report['pipeline']} over {report['input']}\n",
           f"Labels {report['labels']}; metric {metric}.\n", table([*keys, *shown, "scored", "errors", "counts"], rows)]
    best = report["best"]
    if best:
        tied = f"; tied with {', '.join(best['ties'])}" if best.get("ties") else ""
        out.append(f"Best: {best['set_line']} ({metric} {_cell(best['metric'])}, "
                   f"accuracy {_cell(best['accuracy'])}{tied})\n")
    return "\n".join(out)


def sweep_plots(report: dict[str, Any]) -> list[str]:
    """One chart per swept key: the metric over its values, one line per setting of the other keys."""
    charts = []
    for key in report["grid"]:
        xs = report["grid"][key]
        lines: dict[str, list[float | None]] = {}
        for s in report["settings"]:
            others = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in s["set"].items() if k != key)
            series = lines.setdefault(others, [None] * len(xs))
            series[xs.index(s["set"][key])] = s.get("metric")
        charts.append(svg_plot(f"{report['metric']} against {key}", xs, lines, report["metric"]))
    return charts


def html_page(title: str, markdown: str, charts: Sequence[str] = (), heading: str = "") -> str:
    """A page in report.html's style: `markdown` as HTML, then the charts under `heading`. It is
    self-contained: inline style and SVG, no script, nothing fetched (not even a favicon)."""
    figures = "".join(f'<figure class="chart">{chart}</figure>' for chart in charts)
    shown = f'{heading}<div class="charts">{figures}</div>\n' if charts else ""
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
            f"<title>{html.escape(title)}</title><style>{STYLE}{CHART_STYLE}</style></head>\n<body><main>\n"
            f"{markdown_to_html(markdown)}\n{shown}</main></body></html>\n")


def sweep_html(report: dict[str, Any]) -> str:
    """One page: the table, then one chart per swept key."""
    return html_page(f"sweep of {report['pipeline']}", sweep_markdown(report), sweep_plots(report))


def write_eval(folder: Path, report: dict[str, Any]) -> None:
    """eval.json and eval.md beside the run's results, and the eval section of report.html."""
    text = eval_markdown(report)
    atomic_write(folder / "eval.json", dumps(report) + "\n")
    atomic_write(folder / "eval.md", text)
    page = folder / "report.html"
    if page.is_file():
        # errors="replace": a page damaged since the run (bytes not UTF-8) still takes the section
        atomic_write(page, with_section(page.read_text(encoding="utf-8", errors="replace"), markdown_to_html(text)))


def write_sweep(folder: Path, report: dict[str, Any]) -> None:
    atomic_write(folder / "sweep.json", dumps(report) + "\n")
    atomic_write(folder / "sweep.md", sweep_markdown(report))
    atomic_write(folder / "sweep.html", sweep_html(report))
