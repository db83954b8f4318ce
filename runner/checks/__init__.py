"""Static checks: what `runner validate` refuses or warns about before anything runs, each located
at file:line:col with the fix. The loader runs them (`checker`) on every pipeline not already
found valid; it also says which values a verdict can take (`verdict_values`).

JSON Schemas with YAML positions, and params against their declared types (`json_schema`), the
shapes of step results and the `steps.X.FIELD` reads checked against them (`result_shapes`),
every template and expression in its scope (`expressions`, with the unknown filters, tests and
included templates, and the environment variables a pipeline needs), what its expressions can
hold before the run (`static_values`), and the comparisons, foreach and repeated samples that
can never work, with validate's warning about numeric votes that can be null (`semantics`)."""
