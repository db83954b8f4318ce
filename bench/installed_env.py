"""The environment bench scripts start `runner` processes in: as an installed runner runs,
with modules loaded from their compiled .pyc. A shell that sets PYTHONDONTWRITEBYTECODE
(as some sandboxes do) would otherwise have every process compile runner's source again,
a tenth of a second of a fully cached run that no installed runner pays."""

from __future__ import annotations

import os

INSTALLED_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
