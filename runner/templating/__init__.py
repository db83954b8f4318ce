"""Templating: the one sandboxed Jinja environment a pipeline's templates and expressions run in
(`sandbox`: rendering, native values of `{{ expr }}`, the filters and globals runner adds), the
code Jinja makes of each template, once per text in a process (`compiled`), its size guards
(`limits`), the filters plugins register (`filters`) and the values a step's result is read as
in a template (`step_results`)."""
