"""Connecting to a cluster with the credentials kubectl would use.

:func:`connect` reads ``--kubeconfig``, else ``$KUBECONFIG`` (several paths joined with ``:``,
merged like kubectl), else ``~/.kube/config``, else the in-cluster service account, and opens a
:class:`kube.client.Cluster` on it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from kubeplace.kube.api_errors import cause_of
from kubeplace.kube.client import Cluster
from kubeplace.kube.errors import ConfigMissing

DEFAULT_KUBECONFIG = "~/.kube/config"
CONNECTIONS = 64
"""Kept-alive connections to the API server: ``serve`` holds one per watch and binds on many at
once (the client's default, 5 per CPU, would open and drop a TLS connection per binding)."""


def connect(kubeconfig: str | None = None, context: str | None = None) -> Cluster:
    """A cluster from ``kubeconfig`` (``--kubeconfig``), else ``$KUBECONFIG`` (several paths
    joined with ``:``, merged like kubectl), else ``~/.kube/config``, else the in-cluster
    service account. Raises :class:`ConfigMissing` when none of them works."""
    configuration = k8s.Configuration()
    configuration.connection_pool_maxsize = CONNECTIONS
    config_files = _kubeconfig_paths(kubeconfig)
    if config_files is not None:
        description = _load_kubeconfig(configuration, config_files, context)
    elif context:
        raise ConfigMissing(f"--context {context} given, but there is no kubeconfig ({DEFAULT_KUBECONFIG})")
    else:
        description = _load_in_cluster(configuration)
    return Cluster(k8s.ApiClient(configuration), description)


def _kubeconfig_paths(explicit: str | None) -> str | None:
    """The kubeconfig path list to load (``a:b`` merged), or None to try in-cluster."""
    if explicit:
        return explicit
    from_environment = os.environ.get("KUBECONFIG", "")
    if from_environment.strip(os.pathsep):
        return from_environment
    default = Path(DEFAULT_KUBECONFIG).expanduser()
    return str(default) if default.exists() else None


def _load_kubeconfig(configuration: Any, paths: str, context: str | None) -> str:
    existing = [path for path in paths.split(os.pathsep) if path and Path(path).expanduser().exists()]
    if not existing:
        raise ConfigMissing(f"kubeconfig {paths} does not exist")
    try:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=os.pathsep.join(existing),
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
        _, current = k8s_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=os.pathsep.join(existing)
        )
    except Exception as error:  # the loader raises ConfigException, yaml and OS errors alike
        raise ConfigMissing(f"cannot use kubeconfig {paths}: {cause_of(error)}") from None
    chosen = context or (current or {}).get("name", "")
    return f"context {chosen}" if chosen else "kubeconfig"


def _load_in_cluster(configuration: Any) -> str:
    try:
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except k8s_config.ConfigException as error:
        raise ConfigMissing(
            f"no kubeconfig (--kubeconfig, KUBECONFIG or {DEFAULT_KUBECONFIG}) and not running in a cluster ({error})"
        ) from None
    return "in-cluster service account"
