"""Loading and composing a pipeline: a YAML file read into the typed, frozen `Pipeline` the rest
of runner reads (`loader`, `model`; with the failure defaults per step type), with the bases it
`extends:`, its params declared once (`params`), `--set` and `--model` (`overrides`), the parts
its `pipeline` steps run (`parts`), its `probes:` and `examples:`, and the step types it may
use, with the plugins it names (`step_catalog`). The loader runs the checks of
runner/checks/ on every pipeline not already found valid (`validated`).

Beside them: formulas parsed without eval (`formula`), the editor's schema (`editor_schema`),
and `runner import openai-evals`' pipeline (`openai_evals`)."""
