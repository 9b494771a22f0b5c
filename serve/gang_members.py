"""Which gangs are complete: their minMember pods exist, so nothing more is worth waiting for.

``serve``'s queue hands a complete gang to the next cycle at once and lets an incomplete one wait
for its members (:mod:`serve.queue`). The members are counted from the watch: every pod of the
gang that exists and is not terminating, pending or bound (the kube-scheduler's Coscheduling
counts its group's pods the same way before it lets one through). minMember is the PodGroup
object's the pods name (from the informer's store), or the ``kubeplace.io/gang-min-member``
annotation of a CRD-free gang. A gang whose minMember cannot be read here (a Kueue Workload, a
JobSet's followers, a PodGroup not seen yet or unreadable) counts as incomplete: it is batched
by the fixed window as before, and the plan says why it waits.
"""

from __future__ import annotations

import threading

from kubeplace.kube.errors import InputError
from kubeplace.kube.gangs import GANG_APIS, named_pod_group, parse_pod_group, plain_groups
from kubeplace.kube.objects import GangKey, Pod
from kubeplace.serve.informer import CLUSTER, Store


class GangMembers:
    """Gang -> the keys of its pods that exist (and the last member seen, for its minMember);
    thread-safe."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._members: dict[GangKey, set[str]] = {}
        self._gang_of: dict[str, GangKey] = {}
        self._sample: dict[GangKey, Pod] = {}

    def changed(self, key: str, pod: Pod, gang: GangKey | None) -> None:
        """The pod ``key`` was added or changed: a member of ``gang`` (None: of none) while it is
        not terminating."""
        terminating = pod.deleting
        with self._lock:
            if self._gang_of.get(key) != gang or terminating:
                self._drop(key)
            if gang is None or terminating:
                return
            self._gang_of[key] = gang
            self._members.setdefault(gang, set()).add(key)
            self._sample[gang] = pod

    def deleted(self, key: str) -> None:
        with self._lock:
            self._drop(key)

    def _drop(self, key: str) -> None:
        gang = self._gang_of.pop(key, None)
        members = self._members.get(gang) if gang is not None else None
        if gang is None or members is None:
            return
        members.discard(key)
        if not members:
            del self._members[gang]
            self._sample.pop(gang, None)

    def complete(self, gang: GangKey) -> bool:
        """Its minMember pods exist (False when its minMember cannot be read here)."""
        with self._lock:
            count, pod = len(self._members.get(gang, ())), self._sample.get(gang)
        if pod is None:
            return False
        min_member = self._min_member(gang, pod)
        return min_member is not None and count >= min_member

    def _min_member(self, gang: GangKey, pod: Pod) -> int | None:
        group, name = named_pod_group(pod)
        try:
            if not group:
                plain = plain_groups([pod], set())
                return plain[0].min_member if plain and plain[0].key == gang else None
            for api_group, version, plural in GANG_APIS:
                if api_group == group and plural == "podgroups":
                    obj = self.store.get(f"{api_group}/{version}/{plural}", f"{gang.namespace}/{name}")
                    if obj is not None:
                        found = parse_pod_group(obj, CLUSTER)
                        return None if found.unreadable else found.min_member
        except (InputError, KeyError, TypeError, ValueError):
            return None  # (the plan says what is wrong with it)
        return None

    def __len__(self) -> int:
        with self._lock:
            return len(self._members)
