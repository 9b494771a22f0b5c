"""mypy on kubeplace as it is installed, from a checkout: ``python tools/typecheck.py [mypy args]``.

kubeplace's subpackages are the checkout's top-level folders, which the build maps into the
package (``[tool.setuptools.package-dir]`` in pyproject.toml) and a finder maps at run time.
mypy follows neither, so this builds the package's tree once more where mypy looks first
(``mypy_path`` in pyproject.toml: build/typecheck/kubeplace, linked to the folders, copied where
the file system has no symbolic links), runs mypy with the arguments given, and prints its
findings under the checkout's own paths (``kube/parse.py``, not the tree's). Once the tree
exists a plain ``mypy`` works too (its paths are the tree's); the links keep it current.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent
TREE = CHECKOUT / "build" / "typecheck"
PACKAGE = "kubeplace"


def folders() -> dict[str, str]:
    """``{"kube": "kube", ...}``: each mapped subpackage's name under kubeplace -> its folder."""
    config = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())
    mapped = config["tool"]["setuptools"]["package-dir"]
    return {name.removeprefix(f"{PACKAGE}."): folder for name, folder in mapped.items()}


def _link(source: Path, target: Path) -> None:
    try:
        target.symlink_to(source, target_is_directory=source.is_dir())
    except OSError:  # no symbolic links here: a copy, rebuilt on every run
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, target)


def build_tree() -> dict[str, str]:
    """Writes TREE/kubeplace; returns {the tree's path prefix: the checkout's}, both relative."""
    package = TREE / PACKAGE
    shutil.rmtree(package, ignore_errors=True)
    package.mkdir(parents=True)
    prefix = package.relative_to(CHECKOUT).as_posix()
    paths = {}
    for name, folder in folders().items():
        _link(CHECKOUT / folder, package / name)
        paths[f"{prefix}/{name}/"] = f"{folder}/"
    for module in (CHECKOUT / PACKAGE).glob("*.py"):
        _link(module, package / module.name)
    paths[f"{prefix}/"] = f"{PACKAGE}/"
    return paths


def main(args: list[str]) -> int:
    paths = build_tree()
    out = subprocess.run([sys.executable, "-m", "mypy", *args], cwd=CHECKOUT, capture_output=True, text=True,
                         check=False)
    for stream, text in ((sys.stdout, out.stdout), (sys.stderr, out.stderr)):
        for tree_path, checkout_path in paths.items():  # the most specific first: folders, then kubeplace/
            text = text.replace(tree_path, checkout_path).replace(str(CHECKOUT / tree_path), checkout_path)
        stream.write(text)
    return out.returncode


if __name__ == "__main__":
    os.chdir(CHECKOUT)
    sys.exit(main(sys.argv[1:]))
