"""What a run ends with: summary.json, report.md and report.html, and the --format exports."""
