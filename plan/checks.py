"""What the verifier needs from a configuration and profile: the enabled rules' own verifier
checks with their args (Tenant's, GPUModel's, ...), the GPU request settings, a single-pair
check through its filter for each user plugin (an in-tree rule always has a verifier of its
own: tests/models/test_rules.py), and the pods' rules that the profile's plugins cannot model
(a plan must not place those pods)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kubeplace.kube.objects import Node, Pod, Snapshot
from kubeplace.models.config import Configuration, Profile, instantiate
from kubeplace.models.framework import FilterPlugin, PluginSet
from kubeplace.models.plugins import RULES
from kubeplace.models.plugins.dynamic_resources import NAME as DYNAMIC_RESOURCES
from kubeplace.models.plugins.volume_binding import NAME as VOLUME_BINDING
from kubeplace.plan.gc_pause import fewer_collections
from kubeplace.plan.plan import Placement
from kubeplace.plan.verify import VerifySettings, Violation, rule_checks, verify
from kubeplace.plan.verify_gpu import verify_devices
from kubeplace.plan.verify_owned import verify_owned

PairCheck = Callable[[Pod, Node], str | None]


def verify_settings(config: Configuration, profile: Profile) -> VerifySettings:
    names = profile.plugin_names(config.registry)
    return VerifySettings(
        rules=rule_checks(names, profile.plugin_args), gpu=config.gpu,
    )


def plugin_checks(plugins: PluginSet) -> Sequence[PairCheck]:
    """User filter plugins checked pair by pair through their filter (every in-tree rule has its
    own verifier check, ``RuleCheck``)."""
    in_tree = {r.name for r in RULES}
    return [_pair_check(f) for f in plugins.filters if f.name not in in_tree]


def _pair_check(plugin: FilterPlugin) -> PairCheck:
    def check(pod: Pod, node: Node) -> str | None:
        return None if bool(plugin.filter(pod, [node])[0]) else f"{plugin.name}: {plugin.reason}"
    return check


def verify_plan(snapshot: Snapshot, placements: Sequence[Placement], config: Configuration,
                profile: Profile, plugins: PluginSet | None = None) -> list[Violation]:
    """Every hard rule, GPU devices and the volumes chosen included, for a plan about to be bound,
    and that what binding it writes is the placed pods' own (``plan.verify_owned``).
    ``plugins``: the profile's plugins instantiated for this snapshot, when the caller has them
    (they are built again otherwise)."""
    with fewer_collections():
        return _verify_plan(snapshot, placements, config, profile, plugins)


def _verify_plan(snapshot: Snapshot, placements: Sequence[Placement], config: Configuration,
                 profile: Profile, plugins: PluginSet | None) -> list[Violation]:
    counted = [(p.namespace, p.name, p.node, p.count) for p in placements]
    settings = verify_settings(config, profile)
    plugins = plugins or instantiate(config, profile, snapshot)
    volumes = {(p.namespace, p.name): p.volumes for p in placements}
    claims = {(p.namespace, p.name): p.claims for p in placements}
    violations = [Violation(*finding) for finding in verify_owned(
        snapshot, placements, settings.checks(DYNAMIC_RESOURCES), settings.checks(VOLUME_BINDING))]
    violations += verify(plugins.mark_unmodelled(snapshot, bound=False), counted, settings, plugin_checks(plugins),
                         volumes, claims)
    return violations + verify_devices(snapshot, [(p.namespace, p.name, p.node, p.gpus, p.count) for p in placements],
                                       settings)
