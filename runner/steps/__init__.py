"""Step types, one module each, registered by name."""

from .base import STEP_TYPES, Step, StepCatalog, StepError, register, step_class, step_names

__all__ = ["STEP_TYPES", "Step", "StepCatalog", "StepError", "register", "step_class", "step_names"]
