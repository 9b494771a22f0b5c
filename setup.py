"""kubeplace's packages, derived from the folders pyproject.toml maps into it: each mapped folder
(``[tool.setuptools.package-dir]``) and every folder under it holding an ``__init__.py``. A new
subpackage (a rule's folder, ``models/plugins/<rule>/``) is in the wheel without a line of
configuration; tests/test_packaging.py and tests/install/test_distributions.py check the result.
Everything else is in pyproject.toml."""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def packages() -> list[str]:
    mapped = tomllib.loads((HERE / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    found = {"kubeplace"}
    for package, folder in mapped.items():
        for init in (HERE / folder).rglob("__init__.py"):
            found.add(".".join([package, *init.parent.relative_to(HERE / folder).parts]))
    return sorted(found)


setup(packages=packages())
