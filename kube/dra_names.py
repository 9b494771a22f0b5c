"""The names of DRA objects' fields as the API server validates them
(``pkg/apis/resource/validation``): a device attribute's fully qualified name."""

from __future__ import annotations

import re

from kubeplace.kube.errors import dns1123_problems

_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_C_IDENTIFIER_RULE = ("a valid C identifier must start with alphabetic character or '_', followed by a string of "
                      "alphanumeric characters or '_' (e.g. 'my_name', or 'MY_NAME', or 'MyName', regex used for "
                      f"validation is '{_C_IDENTIFIER.pattern}')")
ATTRIBUTE_NAME_MAX, DOMAIN_MAX = 32, 63


def fully_qualified_name_problems(name: str) -> list[str]:
    """Why ``name`` is not a device attribute's fully qualified name (``domain/identifier``), in
    the API server's words (validateFullyQualifiedName); empty when it is one. Like the API
    server, it does not look past a second '/'."""
    parts = name.split("/")
    problems = []
    identifier = parts[0] if len(parts) == 1 else parts[1] if len(parts) == 2 else None
    if len(parts) == 2:
        domain = parts[0]
        if not domain:
            problems.append("the domain must not be empty")
        else:
            if len(domain) > DOMAIN_MAX:
                problems.append(f"Too long: may not be more than {DOMAIN_MAX} bytes")
            problems += dns1123_problems(domain.lower())
        if not identifier:
            problems.append("the name must not be empty")
            identifier = None
    if identifier is not None:
        if len(identifier) > ATTRIBUTE_NAME_MAX:
            problems.append(f"Too long: may not be more than {ATTRIBUTE_NAME_MAX} bytes")
        if not _C_IDENTIFIER.fullmatch(identifier):
            problems.append(_C_IDENTIFIER_RULE)
    if "/" not in name:
        problems.append("a fully qualified name must be a domain and a name separated by a slash")
    return problems
