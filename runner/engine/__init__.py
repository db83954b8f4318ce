"""Running items: the step interpreter, its context, selection, progress and the step types."""
