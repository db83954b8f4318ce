"""A run and its folder: what it is asked to do (`request`), where it writes (`folders`: run
folders, groups and `latest`; `lock`), its results file (`results_file`), its record
(`manifest`: run.json; `record`) and how it ended (`record.RunOutcome`)."""
