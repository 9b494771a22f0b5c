"""Importing ``kubeplace`` from a source checkout, where its subpackages are the top-level folders.

An installed kubeplace (a wheel) holds ``kubeplace/kube/`` and the rest: the build backend maps
each folder into the package (``[tool.setuptools.package-dir]`` in pyproject.toml). In a checkout
the folders stay at the top, so when this package sits beside a pyproject.toml that maps them,
a finder resolves ``kubeplace.kube`` to ``<checkout>/kube`` (and so on), from the same map. Their
modules then load from that checkout: the one on ``sys.path`` (a worktree's tests test that
worktree), not the one an editable install happens to point at.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import tomllib
from collections.abc import Mapping, Sequence
from types import ModuleType


class CheckoutFolders(importlib.abc.MetaPathFinder):
    """Finds each mapped subpackage (``kubeplace.kube``) in its checkout folder; nothing else."""

    def __init__(self, folders: Mapping[str, str]) -> None:
        self.folders = dict(folders)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(fullname, os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])


def mapped_folders(checkout: str, package: str) -> dict[str, str]:
    """``{"kubeplace.kube": "<checkout>/kube", ...}`` from the checkout's pyproject.toml; empty when
    there is none (an installed package) or it maps nothing under ``package``."""
    try:
        with open(os.path.join(checkout, "pyproject.toml"), "rb") as f:
            config = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    package_dir = config.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    return {name: os.path.join(checkout, folder) for name, folder in package_dir.items()
            if name.startswith(f"{package}.") and os.path.isfile(os.path.join(checkout, folder, "__init__.py"))}


def install(package_dir: str, package: str) -> None:
    """Put the finder first on ``sys.meta_path`` when ``package_dir`` is a checkout's package."""
    folders = mapped_folders(os.path.dirname(package_dir), package)
    if folders and not any(isinstance(f, CheckoutFolders) for f in sys.meta_path):
        sys.meta_path.insert(0, CheckoutFolders(folders))
