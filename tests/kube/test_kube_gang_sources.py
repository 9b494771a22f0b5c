"""The gang source registry (``kube.gang_sources``): every source is reached through it."""

from __future__ import annotations

from kubeplace.kube.gang_sources import KINDS, READS, SOURCES, STATUS_APIS
from kubeplace.kube.gangs import GANG_APIS, POD_GROUP_API_GROUPS, gang_of, without_gang
from tests.builders import GANG_SOURCES, pod


def test_every_registered_source_has_a_member_builder() -> None:
    """``tests.builders.GANG_SOURCES`` (which ``test_kube_gang_identity`` checks ``gang_of`` against)
    marks a pod for every registered source: a new source comes with its way of joining."""
    claimed = {source.name for source in SOURCES for join in GANG_SOURCES.values()
               if source.member(join(pod("w0", "ml"), "job").build()) is not None}
    assert claimed == {source.name for source in SOURCES}


def test_what_gangs_reads_and_writes_is_the_registrys() -> None:
    assert GANG_APIS == READS
    assert set(POD_GROUP_API_GROUPS) == set(KINDS)
    assert {group for group, _, _ in STATUS_APIS} <= set(KINDS)
    assert all(api in READS for kind in KINDS.values() for api in [(kind.group, kind.versions[-1], "podgroups")])


def test_without_gang_removes_the_marks_of_every_pod_group_source() -> None:
    for source in SOURCES:
        if source.kind is None and not source.labels:
            continue  # (a JobSet's or Kueue's pod keeps its marks: its gang is its owner's)
        for join in GANG_SOURCES.values():
            member = join(pod("w0", "ml"), "job").build()
            if source.member(member) is not None:
                assert gang_of(without_gang(member)) is None, source.name
