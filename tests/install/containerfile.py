"""The Containerfile's instructions, read for the tests that replay its build stage without a
container engine: stages, ARG defaults, COPY sources, RUN commands."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Stage:
    base: str
    name: str = ""
    args: dict[str, str] = field(default_factory=dict)
    copies: list[tuple[list[str], str]] = field(default_factory=list)
    """(sources, destination) of each COPY from the build context (not ``--from``)."""
    copies_from: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    workdir: str = "/"
    user: str = ""
    entrypoint: list[str] = field(default_factory=list)


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, rest) per instruction, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        keyword, _, rest = whole.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def read_stages(path: Path) -> list[Stage]:
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for keyword, rest in instructions(path.read_text()):
        if keyword == "ARG":
            name, _, default = rest.partition("=")
            (stages[-1].args if stages else global_args)[name] = default
        elif keyword == "FROM":
            base, _, name = rest.partition(" AS ")
            base = re.sub(r"\$\{(\w+)\}", lambda m: global_args.get(m.group(1), ""), base)
            stages.append(Stage(base.strip(), name.strip()))
        elif keyword == "COPY":
            words = shlex.split(rest)
            if words[0].startswith("--from="):
                stages[-1].copies_from.append(" ".join(words[1:]))
            else:
                stages[-1].copies.append((words[:-1], words[-1]))
        elif keyword == "RUN":
            stages[-1].runs.append(rest)
        elif keyword == "WORKDIR":
            stages[-1].workdir = rest
        elif keyword == "USER":
            stages[-1].user = rest
        elif keyword == "ENTRYPOINT":
            stages[-1].entrypoint = json.loads(rest)
    return stages
