"""The Kubernetes client's failures as kubeplace's errors.

Every exception the client, HTTP or the connection raises becomes one of the named
:class:`ClusterError` subclasses of ``kube.errors``, carrying the HTTP status and the server's
message, so nothing of the client leaks out of ``kube.client``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import urllib3
from kubernetes.client.exceptions import ApiException

from kubeplace.kube.errors import (
    ApiFailure,
    ClusterError,
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    Unauthorized,
    Unreachable,
)


@contextlib.contextmanager
def translated_errors(action: str) -> Iterator[None]:
    """Turns client, HTTP and connection exceptions into :class:`ClusterError` subclasses."""
    try:
        yield
    except ClusterError:
        raise
    except ApiException as error:
        raise api_error(action, error) from None
    except (urllib3.exceptions.HTTPError, OSError) as error:
        raise Unreachable(f"{action}: API server unreachable: {cause_of(error)}") from None
    except ValueError as error:  # an answer that is not JSON
        raise ApiFailure(f"{action}: unexpected answer from the API server: {error}") from None


def api_error(action: str, error: ApiException) -> ClusterError:
    """The named error for an HTTP error answer, with the status and the server's message."""
    status = int(error.status or 0)
    server_message, reason = _status_message(error)
    message = f"{action}: HTTP {status} {error.reason or ''}".rstrip() + (
        f": {server_message}" if server_message else ""
    )
    kinds: dict[int, type[ClusterError]] = {401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
                                           410: Gone}
    if status == 401:
        message += " (the credential is missing, wrong or expired: log in again or renew the token)"
    return kinds.get(status, ApiFailure)(message, status=status, reason=reason)


def _status_message(error: ApiException) -> tuple[str, str]:
    """The ``message`` and ``reason`` of the ``Status`` object the API server answered with."""
    try:
        status = json.loads(error.body or "")
    except (TypeError, ValueError):
        return (str(error.body or "").strip()[:300], "")
    if not isinstance(status, dict):
        return ("", "")
    return (str(status.get("message", "")), str(status.get("reason", "")))


def cause_of(error: BaseException) -> str:
    """The error in one line, its real cause for a connection failure (urllib3's MaxRetryError
    wraps it)."""
    reason = getattr(error, "reason", None)
    return str(reason or error)
