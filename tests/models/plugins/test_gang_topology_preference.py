"""models/plugins/gang_topology_preference/: a term for the gangs' domains only when some gang has
a preferred topology key; a SCORE rule with no verifier."""

from __future__ import annotations

from kubeplace.kube.gangs import PREFERRED_TOPOLOGY_KEY
from kubeplace.models.aggregate import aggregate
from kubeplace.models.config import Configuration, Profile, instantiate
from kubeplace.models.framework import GangDomainsTerm
from kubeplace.models.plugins.gang_topology_preference import GANG_DOMAIN_WEIGHT, RULE, GangTopologyPreference
from tests.builders import snapshot_of
from tests.models.test_model_gang_topology import TWO_ZONES, ZONE, group, member


def test_a_term_only_when_a_gang_prefers_a_key() -> None:
    preferring = group("job", 2, key=None)
    preferring["metadata"]["annotations"] = {PREFERRED_TOPOLOGY_KEY: ZONE}
    for podgroup, terms in ((preferring, (GangDomainsTerm(GANG_DOMAIN_WEIGHT),)), (group("job", 2), ())):
        snap = snapshot_of(*TWO_ZONES, podgroup, member("w0"), member("w1"))
        problem = aggregate(snap, instantiate(Configuration(), Profile(), snap)).problem
        assert GangTopologyPreference().terms(problem) == terms
    assert (RULE.name, RULE.verify, RULE.needs_verifier) == ("GangTopologyPreference", None, False)
