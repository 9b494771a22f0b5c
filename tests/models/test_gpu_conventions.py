"""The GPU conventions have one internal type and one spelling per concept.

The file's ``gpu`` section (camelCase) is read only by the external v1alpha1 type and its
conversion; everything else (model, solver, serve, rebalance, verifier, bench) reads
:class:`kubeplace.kube.gpu_conventions.GpuConventions`, and the resource names behind the
conventions (``nvidia.com/gpu`` and the HAMi and Koordinator share resources) are written once.
"""

from __future__ import annotations

import ast
import re

from kubeplace.kube.gpu_conventions import DEFAULT_CONVENTIONS, GpuConventions
from kubeplace.models import config_v1alpha1 as v1
from kubeplace.models.config_load import parse_configuration
from kubeplace.plan.checks import verify_settings
from tests.test_structure import CHECKOUT, product_modules

EXTERNAL_NAMES = ("deviceResource", "percentPerDevice", "percentOfGpus")
EXTERNAL_MODULES = {"models/config_v1alpha1.py", "models/config_load.py"}
"""The external type and its conversion: the only readers of the file's spelling."""
OLD_SPELLINGS = ("percent_with_count", "percent_alone", "gpu_percent_per_device", "gpu_percent_of_gpus",
                 "gpu_device_resource")
DEFINED_ONCE = {
    "nvidia.com/gpu": "kube/objects.py",
    "nvidia.com/gpucores": "kube/gpu_conventions.py",
    "nvidia.com/gpumem-percentage": "kube/gpu_conventions.py",
    "koordinator.sh/gpu-core": "kube/gpu_conventions.py",
    "koordinator.sh/gpu-memory-ratio": "kube/gpu_conventions.py",
}


def _sources() -> dict[str, str]:
    """Every product module and the benchmarks' package, by path from the checkout."""
    paths = [m.path for m in product_modules().values()] + sorted((CHECKOUT / "bench").rglob("*.py"))
    return {str(p.relative_to(CHECKOUT)): p.read_text() for p in paths}


def test_the_files_camel_case_gpu_names_are_read_only_by_the_external_type_and_its_conversion() -> None:
    found = sorted(f"{path}: {name}" for path, text in _sources().items() for name in EXTERNAL_NAMES
                   if path not in EXTERNAL_MODULES and re.search(rf"\b{name}\b", text))
    assert found == []


def test_each_gpu_convention_has_one_name() -> None:
    found = sorted(f"{path}: {name}" for path, text in _sources().items() for name in OLD_SPELLINGS
                   if re.search(rf"\b{name}\b", text))
    assert found == []


def test_the_gpu_resource_names_are_string_literals_only_where_defined() -> None:
    found = []
    for path, text in _sources().items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and node.value in DEFINED_ONCE and DEFINED_ONCE[node.value] != path:
                found.append(f"{path}:{node.lineno}: {node.value!r}")
    assert found == []
    assert all((CHECKOUT / path).is_file() for path in DEFINED_ONCE.values())


def test_the_files_gpu_section_is_converted_once_and_the_verifier_reads_the_same_conventions() -> None:
    config = parse_configuration({"apiVersion": v1.API_VERSION, "kind": v1.KIND, "gpu": {
        "deviceResource": "example.com/gpu", "percentPerDevice": ["example.com/cores"],
        "percentOfGpus": ["example.com/share"]}})
    assert config.gpu == GpuConventions(device_resource="example.com/gpu", percent_per_device=("example.com/cores",),
                                        percent_of_gpus=("example.com/share",))
    assert config.gpu.share_resources == ("example.com/cores", "example.com/share")
    assert verify_settings(config, config.profile(None)).gpu is config.gpu


def test_the_files_gpu_defaults_are_the_internal_defaults() -> None:
    config = parse_configuration({"apiVersion": v1.API_VERSION, "kind": v1.KIND})
    assert config.gpu == DEFAULT_CONVENTIONS == GpuConventions()
    assert DEFAULT_CONVENTIONS.device_resource == "nvidia.com/gpu"
