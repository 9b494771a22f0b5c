"""Snapshots from YAML/JSON files, as ``kubectl get nodes,pods -A -o yaml`` writes them.

A path is a file of one or more YAML documents (JSON is YAML) or a directory, read recursively
(``*.yaml``, ``*.yml``, ``*.json``, sorted). Documents are objects of any kind, or Lists of them:
:func:`load_objects` returns them all, for the features that read them (PodDisruptionBudgets for
rebalance); the snapshot itself is built by :func:`kube.parse.build_snapshot`, exactly as for a
live cluster, from the kinds it reads (:data:`kube.raw_objects.READ_KINDS`), the others counted.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubeplace.kube.catalogue import InstanceType, parse_catalogue
from kubeplace.kube.errors import InputError
from kubeplace.kube.objects import Snapshot
from kubeplace.kube.parse import build_snapshot
from kubeplace.kube.raw_objects import Sourced, flatten, object_label

SNAPSHOT_SUFFIXES = (".yaml", ".yml", ".json")

_FLOAT_TAG = "tag:yaml.org,2002:float"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_YAML12_FLOAT = re.compile(r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X)
"""Floats as YAML 1.2 (and the API server's reader) has them: ``1e3``, ``1.0e3`` and ``.5`` too,
where PyYAML's YAML 1.1 resolver wants a dot and a signed exponent (``1e3`` was the string
"1e3"); no base-60 ``1:30.5``. Integers keep PyYAML's resolver."""


def _yaml12_loader(base: type[yaml.SafeLoader]) -> type[yaml.SafeLoader]:
    """``base`` with the YAML 1.2 float resolver in place of YAML 1.1's (same position, so
    booleans, nulls and integers resolve as before)."""
    loader: type[yaml.SafeLoader] = type("Yaml12Loader", (base,), {})
    loader.yaml_implicit_resolvers = {
        first: [(tag, _YAML12_FLOAT if tag == _FLOAT_TAG else pattern) for tag, pattern in resolvers]
        for first, resolvers in base.yaml_implicit_resolvers.items()}
    for first in "-+0123456789.":
        if not any(tag == _FLOAT_TAG for tag, _ in loader.yaml_implicit_resolvers.setdefault(first, [])):
            loader.yaml_implicit_resolvers[first].insert(0, (_FLOAT_TAG, _YAML12_FLOAT))
    loader.add_constructor(_FLOAT_TAG, _float_or_text)
    return loader


def _float_or_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float | str:
    """A float; a literal beyond float64 (``1e400``) stays text, as the API server's reader
    leaves what ``strconv.ParseFloat`` refuses (a quantity ``1e400`` is then out of range)."""
    value: float = loader.construct_yaml_float(node)
    return node.value if math.isinf(value) and "inf" not in node.value.lower() else value


# The C loader is several times faster; a 5,000-node, 10,000-pod dump is ~20 MB of YAML.
_Loader = _yaml12_loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader))
"""The one YAML loader of kubeplace (snapshots, plans, configurations): YAML 1.2 floats, and a
key twice in one mapping is refused (:func:`_duplicate_key`), as the API server refuses it."""


def load_snapshot(
    paths: Sequence[Path],
    *,
    scheduler_name: str = "kubeplace",
    namespaces: set[str] | None = None,
    selector: str | None = None,
) -> Snapshot:
    """The snapshot of the objects in ``paths``; see :func:`kube.parse.build_snapshot` for
    which pods are pending and which count as usage. ``namespaces`` None means all."""
    with _garbage_collector_paused():
        return build_snapshot(
            load_objects(paths),
            scheduler_name=scheduler_name,
            namespaces=namespaces,
            selector=selector,
            source=", ".join(str(path) for path in paths),
        )


def load_objects(paths: Sequence[Path]) -> list[Sourced]:
    """Every object in ``paths`` with its file, Lists expanded, of every kind.

    Raises :class:`InputError` for a missing path, malformed YAML (with the line) or a document
    that is not a mapping with ``kind`` and ``apiVersion``.
    """
    return list(flatten(document for file in snapshot_files(paths) for document in _read(file)))


def load_catalogue(paths: Sequence[Path]) -> tuple[InstanceType, ...]:
    """The instance types of catalogue files (``kube.catalogue``: Karpenter's kwok provider JSON
    or the YAML form of docs/capacity.md), sorted by name; a name twice is refused."""
    found: dict[str, InstanceType] = {}
    for file in snapshot_files(paths):
        for instance_type in parse_catalogue(read_document(file), str(file)):
            if instance_type.name in found:
                raise InputError(f"duplicate instance type (first defined in {found[instance_type.name].source})",
                                 file=str(file), obj=f"instance type {instance_type.name}")
            found[instance_type.name] = instance_type
    return tuple(found[name] for name in sorted(found))


def snapshot_files(paths: Sequence[Path]) -> list[Path]:
    """The files to read: files as given, directories expanded recursively and sorted."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(
                sorted(
                    found for found in path.rglob("*") if found.is_file() and found.suffix.lower() in SNAPSHOT_SUFFIXES
                )
            )
        else:
            check_readable(path)
            files.append(path)
    return files


def check_readable(path: Path) -> None:
    """A regular file or a pipe (``<(kubectl get ...)``, ``/dev/stdin``) can be read; anything
    else is refused for what it is (``/dev/null`` is a character device, not a missing file)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError("no such file or directory", file=str(path)) from None
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror or error}", file=str(path)) from None
    if stat.S_ISREG(mode) or stat.S_ISFIFO(mode):
        return
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    what = next((name for test, name in kinds if test(mode)), "not a regular file")
    raise InputError(f"not a regular file: {what}", file=str(path), expected="a YAML or JSON file")


def read_text(file: Path) -> str:
    """The text of a YAML/JSON file: UTF-8 (a byte-order mark is allowed), or UTF-16 with its
    byte-order mark (what PowerShell's ``>`` writes). Raises :class:`InputError` otherwise."""
    source = str(file)
    check_readable(file)
    try:
        data = file.read_bytes()
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror or error}", file=source) from None
    encoding = "utf-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise InputError(f"not {encoding.removesuffix('-sig').upper()} text: byte 0x{data[error.start]:02x} cannot be "
                         "decoded", file=source, line=line, expected="a UTF-8 YAML or JSON file") from None


def read_document(file: Path) -> Any:
    """The one YAML/JSON document of a file (a configuration or a plan); None when it is empty.

    Raises :class:`InputError` naming the file (and line) when it cannot be read or decoded,
    is malformed, nested too deeply, or holds several documents."""
    documents = _parse_documents(read_text(file), str(file))
    if len(documents) > 1:
        raise InputError(f"{len(documents)} YAML documents", file=str(file), expected="a single document")
    return documents[0] if documents else None


def _read(file: Path) -> Iterator[Sourced]:
    """The non-empty documents of one file."""
    source = str(file)
    text = read_text(file)
    with _garbage_collector_paused():
        documents = _parse_documents(text, source)
    for document in documents:
        if document is not None:
            yield document, source


def _parse_documents(text: str, source: str) -> list[Any]:
    try:
        if text.lstrip()[:1] in ("{", "["):
            try:
                return [json.loads(text, object_pairs_hook=_unique_keys)]
            except ValueError:
                pass  # not plain JSON after all, or a key twice: YAML says where
        try:
            return _load_plain_yaml(text)
        except _NeedsFullLoader:
            return _load_full_yaml(text, source)
    except yaml.YAMLError as error:
        raise _yaml_error(error, source) from None
    except RecursionError:
        raise InputError("nested too deeply to read", file=source) from None
    except ValueError as error:  # a scalar YAML resolves but Python cannot build: 5,000-digit integers
        raise InputError(f"malformed YAML: {str(error).split(';')[0]}", file=source) from None


@contextlib.contextmanager
def _garbage_collector_paused() -> Iterator[None]:
    """Loading builds millions of containers and none is garbage; the cyclic collector
    would walk the growing heap again and again (3x slower on a 20 MB dump)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _NeedsFullLoader(Exception):
    """The document uses anchors, aliases, merge keys, tags or complex keys, or has a key twice
    in a mapping (the full loader says where)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object; ValueError for a key given twice (json.loads keeps the last silently)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("a key twice in an object")
    return out


def _load_full_yaml(text: str, source: str) -> list[Any]:
    """The documents of ``text`` through the node graph; :class:`InputError` for a key given
    twice in a mapping, naming the line, the object and the field."""
    loader: Any = _Loader(text)
    try:
        documents = []
        while loader.check_node():
            node = loader.get_node()
            duplicate = _duplicate_key(node, (), set())
            document = loader.construct_document(node)
            if duplicate is not None:
                raise _duplicate_error(duplicate, document, source)
            documents.append(document)
        return documents
    finally:
        loader.dispose()


Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class _Duplicate:
    path: Path_
    """Where the mapping is, from the document's root (keys and list indexes)."""
    key: str
    line: int
    first_line: int


def _duplicate_key(node: yaml.Node, path: Path_, seen: set[int]) -> _Duplicate | None:
    """The first key given twice in a mapping of the node graph (merged keys, ``<<``, are
    overridden by design and not counted), as the API server's reader refuses it ("mapping key
    ... already defined")."""
    if id(node) in seen:
        return None
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        return next((found for i, child in enumerate(node.value)
                     if (found := _duplicate_key(child, (*path, i), seen)) is not None), None)
    if not isinstance(node, yaml.MappingNode):
        return None
    lines: dict[tuple[str, str], int] = {}
    for key_node, value_node in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE_TAG:
            key, line = (key_node.tag, key_node.value), key_node.start_mark.line + 1
            if key in lines:
                return _Duplicate(path, key_node.value, line, lines[key])
            lines[key] = line
        found = _duplicate_key(value_node, (*path, str(getattr(key_node, "value", "?"))), seen)
        if found is not None:
            return found
    return None


def _duplicate_error(duplicate: _Duplicate, document: Any, source: str) -> InputError:
    """Names the Kubernetes object the mapping is in (the innermost mapping on the way with
    ``kind`` and ``metadata``; a List's item) and the field from it; from the document's root
    for a configuration or a plan."""
    obj, start, here = "", 0, document
    for depth, step in enumerate(duplicate.path):
        if isinstance(here, dict) and "kind" in here and isinstance(here.get("metadata"), dict):
            obj, start = object_label(here), depth
        here = _child(here, step)
    if isinstance(here, dict) and "kind" in here and isinstance(here.get("metadata"), dict):
        obj, start = object_label(here), len(duplicate.path)
    field = "".join(f"[{step}]" if isinstance(step, int) else f".{step}"
                    for step in (*duplicate.path[start:], duplicate.key)).lstrip(".")
    return InputError(f'mapping key "{duplicate.key}" already defined at line {duplicate.first_line}',
                      file=source, line=duplicate.line, obj=obj, field=field)


def _child(here: Any, step: str | int) -> Any:
    """The item at ``step`` (a list index, or a mapping key as the YAML text spells it); None
    when there is none (a key that resolved to another type: ``1``, ``yes``)."""
    if isinstance(step, int):
        return here[step] if isinstance(here, list) and step < len(here) else None
    return here.get(step) if isinstance(here, dict) else None


def _load_plain_yaml(text: str) -> list[Any]:
    """The documents of ``text``, built straight from libyaml's events.

    Gives exactly what ``yaml.load_all(text, CSafeLoader)`` gives for documents without
    anchors, aliases, merge keys, explicit tags or complex keys (what kubectl writes), about
    three times faster, because it skips building the node graph; raises
    :class:`_NeedsFullLoader` for the others. Plain scalars are resolved by the loader's own
    resolvers, only for first characters that some resolver claims (digits, ``t``, ``~``...).
    """
    loader: Any = _Loader(text)
    try:
        loader.get_event()  # StreamStartEvent
        documents = []
        while not loader.check_event(yaml.StreamEndEvent):
            loader.get_event()  # DocumentStartEvent
            documents.append(_plain_document(loader))
            loader.get_event()  # DocumentEndEvent
        return documents
    finally:
        loader.dispose()


def _plain_document(loader: Any) -> Any:
    resolvers: dict[Any, Any] = loader.yaml_implicit_resolvers
    resolve_every_scalar = None in resolvers
    containers: list[Any] = []
    keys: list[Any] = []  # per open mapping: the key awaiting its value, or _NO_KEY
    while True:
        event = loader.get_event()
        kind = type(event)
        if kind is yaml.ScalarEvent:
            if event.anchor is not None:
                raise _NeedsFullLoader
            item = event.value
            if event.implicit[0] and event.tag is None:
                if resolve_every_scalar or not item or item[0] in resolvers:
                    item = _resolved_scalar(loader, item, event.style)
            elif event.tag not in (None, "!", _STR_TAG):
                raise _NeedsFullLoader
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            if event.anchor is not None or event.tag not in (None, _MAP_TAG, _SEQ_TAG):
                raise _NeedsFullLoader
            containers.append({} if kind is yaml.MappingStartEvent else [])
            keys.append(_NO_KEY)
            continue
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            item = containers.pop()
            keys.pop()
        else:  # AliasEvent
            raise _NeedsFullLoader
        if not containers:
            return item
        parent = containers[-1]
        if type(parent) is list:
            parent.append(item)
        elif keys[-1] is _NO_KEY:
            if item == "<<" or isinstance(item, (dict, list)) or item in parent:
                raise _NeedsFullLoader
            keys[-1] = item
        else:
            parent[keys[-1]] = item
            keys[-1] = _NO_KEY


def _resolved_scalar(loader: Any, value: str, style: str | None) -> Any:
    tag = loader.resolve(yaml.ScalarNode, value, (True, False))
    if tag == _STR_TAG:
        return value
    return loader.yaml_constructors[tag](loader, yaml.ScalarNode(tag, value, style=style))


_NO_KEY = object()
_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"


def _yaml_error(error: yaml.YAMLError, source: str) -> InputError:
    mark = getattr(error, "problem_mark", None)
    problem = " ".join(str(getattr(error, "problem", None) or error).split())  # one line
    line = mark.line + 1 if mark is not None else None
    column = f" (column {mark.column + 1})" if mark is not None else ""
    return InputError(f"malformed YAML: {problem}{column}", file=source, line=line)
