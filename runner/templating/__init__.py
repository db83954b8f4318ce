"""Templating: the one sandboxed Jinja environment a pipeline's templates and expressions run in
(`sandbox`: rendering, native values of `{{ expr }}`, the globals runner adds, the code Jinja
makes of each template once per text in a process, the values a step's result is read as), its
size guards (`limits`), and the filters of runner and of plugins (`filters`)."""
