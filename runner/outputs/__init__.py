"""Result files: results.jsonl, summary.json, report.md."""
