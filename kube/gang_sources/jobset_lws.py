"""JobSet and LeaderWorkerSet pods with exclusive topology: their Job's or group's gang, planned with
stand-ins for the followers that do not exist yet (``kube.followers``)."""

from __future__ import annotations

from kubeplace.kube.followers import APIS, leader_gang
from kubeplace.kube.gang_sources.source import GangSource

SOURCE = GangSource("jobset-leaderworkerset", leader_gang, reads=APIS)
