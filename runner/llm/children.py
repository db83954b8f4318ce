"""Python processes runner starts for itself (the log process)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)     # where `import runner` finds runner


def module_command(module: str, *args: str) -> list[str]:
    """`python -P -m module args`: -P, nothing from the working directory is importable."""
    return [sys.executable, "-P", "-m", module, *args]


def child_environment() -> dict[str, str]:
    """This environment, with this runner importable: where it is imported from, after what
    the user set (an installed runner is found there anyway)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), PACKAGE_ROOT) if p)
    return env
