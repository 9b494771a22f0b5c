"""User plugins run behind a guard: their code may raise (or answer nonsense) for one pod or node.

kubeplace calls a user plugin's hooks (``kubeplace.plugins``) through :class:`Guarded`, decided per
hook by what the error concerns:

- a hook about one pod (``pod_key``, ``filter``, ``rejection``, ``node_reasons``, ``unmodelled``,
  ``filter_error``, ``extra_requests``) that raises, or answers what its contract does not allow
  (an unhashable key, a mask of the wrong length), fails that pod's class: its pods are not
  placed, and the whole reason is ``plugin X failed: <hook>(): <error>``; every other pod is
  planned as usual (:class:`PluginFailures`, the filter that refuses them, with that reason);
- a hook about one node (``node_key``, ``extra_allocatable``) fails that node for the plugin: the
  plugin's filter refuses it, with the same reason for that node;
- the plugin's build on the run's snapshot, when it fails, is built again without some pending
  pods, and some nodes (with the pods bound to them), to find the objects it fails on (halving,
  at most ``ATTRIBUTION_BUILDS`` builds): such a pod is refused with ``plugin X failed: build():
  <error>`` as its reason, such a node is refused by the plugin with it, and the plugin built
  without them plans every other pod (``serve`` keeps scheduling past one malformed object);
- a build that fails without any pending pod and on every node, or past the budget, and a hook
  about the whole problem (``terms``, ``constraints``), are no one pod's:
  :class:`~kubeplace.models.framework.PluginError`, one line naming the plugin and the hook (the
  CLI's exit 2); ``node_key_basis`` only saves work, so a failing one turns the reuse off.

In-tree plugins are not guarded: an exception there is kubeplace's bug, shown as such.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, get_args

import numpy as np

from kubeplace.kube.objects import Node, Pod
from kubeplace.models.framework import (
    FILTER,
    ObjectiveTerm,
    PluginError,
    PluginFactory,
    PluginSet,
    RunContext,
    missing_members,
)
from kubeplace.models.problem import (
    Attraction,
    BoolArray,
    DomainPreference,
    Exclusion,
    Gang,
    GroupCap,
    Headroom,
    NodePreference,
    Problem,
    Rule,
    Spread,
)

TERM_TYPES = get_args(ObjectiveTerm)
T = TypeVar("T")
RULE_TYPES = (GroupCap, Gang, Headroom, Exclusion, Attraction, Spread, NodePreference, DomainPreference)


@dataclass(frozen=True)
class Failed:
    """The key a guarded hook gives a pod or node its plugin failed on (a class of its own)."""

    message: str


def failure(plugin: str, hook: str, error: BaseException | str) -> str:
    """``plugin X failed: filter(): ValueError: ...``: the reason of the pods (or node) it concerns."""
    what = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return f"plugin {plugin} failed: {hook}(): {what}"


def _hashable(key: object) -> Hashable:
    hash(key)  # TypeError for an unhashable key: the hook's failure
    return key


@dataclass(frozen=True)
class Faults:
    """The objects a plugin's build failed on (:func:`guarded_factory`), each with its failure:
    the plugin was built without them."""

    pods: Mapping[str, str] = field(default_factory=dict)
    """By pod key (``namespace/name``): pending pods, refused."""
    nodes: Mapping[str, str] = field(default_factory=dict)
    """By node name: nodes the plugin refuses."""


NO_FAULTS = Faults()


@dataclass(eq=False)
class Guarded:
    """A user plugin's part with every hook it has guarded (see the module). It has every optional
    hook, answering as a plugin without it would where the part has none; the framework checks the
    part itself against its extension points before it is wrapped."""

    part: Any
    name: str
    reason: str
    filter_failures: dict[Hashable, str] = field(default_factory=dict)
    """Per pod key, the failure of the part's filter for pods of that key."""
    faults: Faults = NO_FAULTS
    """The objects its build failed on: never shown to the part."""

    def _has(self, hook: str) -> bool:
        return callable(getattr(self.part, hook, None))

    # --- per pod ---------------------------------------------------------------------------

    def pod_key(self, pod: Pod) -> Hashable:
        if self.faults.pods and pod.key in self.faults.pods:
            return Failed(self.faults.pods[pod.key])
        if not self._has("pod_key"):
            return None
        try:
            return _hashable(self.part.pod_key(pod))
        except Exception as e:  # the user's code, for this pod
            return Failed(failure(self.name, "pod_key", e))

    def pod_failure(self, pod: Pod) -> str:
        """The first failure of the part's hooks about ``pod`` alone ("" if none): what
        :class:`PluginFailures` refuses the pod for."""
        key = self.pod_key(pod)
        if isinstance(key, Failed):
            return key.message
        for hook in ("unmodelled", "rejection", "filter_error", "extra_requests"):
            if self._has(hook):
                try:
                    _checked_answer(hook, getattr(self.part, hook)(pod))
                except Exception as e:  # the user's code, for this pod
                    return failure(self.name, hook, e)
        return ""

    def unmodelled(self, pod: Pod) -> tuple[str, ...]:
        return tuple(self._pod_hook("unmodelled", pod, ()))

    def rejection(self, pod: Pod) -> str:
        return str(self._pod_hook("rejection", pod, ""))

    def filter_error(self, pod: Pod) -> str:
        """The pod's failure: of a hook about it alone, or of the filter for its key."""
        key = self.pod_key(pod)
        return (self.pod_failure(pod) or (self.filter_failures.get(key, "") if not isinstance(key, Failed) else "")
                or str(self._pod_hook("filter_error", pod, "")))

    def extra_requests(self, pod: Pod) -> Mapping[str, int]:
        return dict(self._pod_hook("extra_requests", pod, {}))

    def _pod_hook(self, hook: str, pod: Pod, neutral: Any) -> Any:
        """The part's answer, or ``neutral`` (as without the hook) when it fails: the pod is then
        refused by :class:`PluginFailures`, which calls the hook again to say why."""
        if not self._has(hook) or (self.faults.pods and pod.key in self.faults.pods):
            return neutral
        try:
            return _checked_answer(hook, getattr(self.part, hook)(pod))
        except Exception:  # the user's code, for this pod: PluginFailures refuses it
            return neutral

    # --- per node --------------------------------------------------------------------------

    def node_key(self, node: Node) -> Hashable:
        if self.faults.nodes and node.name in self.faults.nodes:
            return Failed(self.faults.nodes[node.name])
        if not self._has("node_key"):
            return None
        try:
            return _hashable(self.part.node_key(node))
        except Exception as e:  # the user's code, for this node
            return Failed(failure(self.name, "node_key", e))

    def node_key_basis(self) -> object:
        if self._has("node_key_basis"):
            try:
                return self.part.node_key_basis()
            except Exception:  # only saves work: this cycle's keys are computed afresh
                pass
        return object()  # equal to nothing: no reuse

    def extra_allocatable(self, node: Node) -> Mapping[str, int]:
        if not self._has("extra_allocatable") or (self.faults.nodes and node.name in self.faults.nodes):
            return {}
        try:
            return dict(_checked_answer("extra_allocatable", self.part.extra_allocatable(node)))
        except Exception:  # the user's code, for this node: it offers nothing
            return {}

    # --- filter ----------------------------------------------------------------------------

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        """The part's filter on the nodes it could key; False on the others, and on every node
        for a pod it fails on (the failure remembered for its key: its pods' reason). Each call
        asks the part (the verifier's checks pod by pod too)."""
        out = np.zeros(len(nodes), dtype=np.bool_)
        key = self.pod_key(pod)
        if isinstance(key, Failed):
            return out
        good = [i for i, n in enumerate(nodes) if not isinstance(self.node_key(n), Failed)]
        if not good:
            return out
        try:
            mask = np.asarray(self.part.filter(pod, [nodes[i] for i in good]))
            if mask.shape != (len(good),) or mask.dtype.kind not in "biu":
                raise TypeError(f"returned {mask.dtype} of shape {mask.shape}, expected {len(good)} booleans")
        except Exception as e:  # the user's code, for this pod's class
            self.filter_failures[key] = failure(self.name, "filter", e)
            return out
        out[good] = mask.astype(np.bool_)
        return out

    def node_reasons(self, pod: Pod, nodes: Sequence[Node]) -> list[tuple[str, ...]]:
        """The failed nodes' failure, the part's own reasons (or its ``reason``) for the others."""
        keys = [self.node_key(n) for n in nodes]
        reasons: list[tuple[str, ...]] = [(k.message,) if isinstance(k, Failed) else () for k in keys]
        good = [i for i, k in enumerate(keys) if not isinstance(k, Failed)]
        if good and self._has("node_reasons"):
            try:
                own = [tuple(map(str, r)) for r in self.part.node_reasons(pod, [nodes[i] for i in good])]
                if len(own) != len(good):
                    raise TypeError(f"returned {len(own)} answers for {len(good)} nodes")
            except Exception as e:  # the user's code: its reasons are lost, its failure said instead
                own = [(failure(self.name, "node_reasons", e),)] * len(good)
            for i, r in zip(good, own, strict=True):
                reasons[i] = r
        return reasons

    # --- the whole problem -----------------------------------------------------------------

    def terms(self, problem: Problem) -> list[Any]:
        return self._whole("terms", problem, TERM_TYPES)

    def constraints(self, view: Any) -> list[Rule]:
        return self._whole("constraints", view, RULE_TYPES)

    def _whole(self, hook: str, arg: Any, types: tuple[type, ...]) -> list[Any]:
        try:
            answer = list(getattr(self.part, hook)(arg))
            wrong = next((a for a in answer if not isinstance(a, types)), None)
            if wrong is not None:
                raise TypeError(f"returned a {type(wrong).__name__}, expected one of "
                                f"{', '.join(t.__name__ for t in types)}")
            if hook == "constraints":
                for rule in answer:
                    _check_rule(rule, len(arg.class_pods), len(arg.nodes))
            for term in answer if hook == "terms" else ():
                _check_term(term)
        except Exception as e:  # the user's code, about every pod: one line
            raise PluginError(failure(self.name, hook, e)) from None
        return answer


CLASS_FIELDS = ("classes", "carriers", "matched", "supporters", "counted", "starters")
"""The fields of a rule that hold class indices."""
NODE_FIELDS = ("domain", "share", "cell", "preferred")
"""The fields of a rule that hold one value per node."""


def _check_rule(rule: Rule, n_classes: int, n_nodes: int) -> None:
    """TypeError when a rule a constraint plugin returned is not one of this problem: class
    indices out of range, arrays of the wrong shape (what the model would index with)."""
    name = type(rule).__name__
    for f in CLASS_FIELDS:
        indices = getattr(rule, f, ())
        if not all(isinstance(c, int | np.integer) and 0 <= c < n_classes for c in indices):
            raise TypeError(f"{name}.{f}: expected class indices from 0 to {n_classes - 1}, got {indices!r}")
    domains = 0
    for f in NODE_FIELDS:
        value = getattr(rule, f, None)
        if value is None:
            continue
        if not isinstance(value, np.ndarray) or value.shape != (n_nodes,) or value.dtype.kind not in "iuf":
            raise TypeError(f"{name}.{f}: expected an array of {n_nodes} numbers (one per node)")
        if not np.isfinite(value).all() or (value.dtype.kind in "iu" and len(value) and value.min() < -1):
            raise TypeError(f"{name}.{f}: expected finite values (a domain index or -1)")
        if f == "domain":
            domains = int(value.max(initial=-1)) + 1
    per_domain = {"cap": domains if getattr(rule, "domain", None) is not None else n_nodes, "bound": domains}
    for f, size in per_domain.items():
        value = getattr(rule, f, None)
        if value is not None and (not isinstance(value, np.ndarray) or value.ndim != 1 or len(value) < size
                                  or value.dtype.kind not in "iu"):
            raise TypeError(f"{name}.{f}: expected an integer array of at least {size} values")
    if isinstance(rule, NodePreference):
        raw = rule.raw
        if not isinstance(raw, np.ndarray) or raw.shape != (len(rule.classes), n_nodes) or raw.dtype.kind not in "iu":
            raise TypeError(f"NodePreference.raw: expected an integer array of shape ({len(rule.classes)}, {n_nodes})")
    if isinstance(rule, Headroom) and (rule.share < 0).any():
        raise TypeError("Headroom.share: expected shares of at least 0")
    if isinstance(rule, Spread) and (rule.max_skew < 1 or rule.min_domains < 1):
        raise TypeError("Spread: maxSkew and minDomains are at least 1")


def _check_term(term: Any) -> None:
    """TypeError when a score plugin's term has a weight that is not a whole number of at least 0,
    or names its resource or plugin with something else than a string."""
    name = type(term).__name__
    if isinstance(term.weight, bool) or not isinstance(term.weight, int) or term.weight < 0:
        raise TypeError(f"{name}.weight: expected an integer of at least 0, got {term.weight!r}")
    for f in ("resource", "plugin"):
        if hasattr(term, f) and not isinstance(getattr(term, f), str):
            raise TypeError(f"{name}.{f}: expected a string, got {getattr(term, f)!r}")


def _checked_answer(hook: str, answer: Any) -> Any:
    """The answer of a per-object hook in the shape its contract says; TypeError otherwise."""
    if hook == "unmodelled":
        answer = tuple(answer)
        if not all(isinstance(r, str) for r in answer):
            raise TypeError("expected strings")
    elif hook in ("rejection", "filter_error"):
        if not isinstance(answer, str):
            raise TypeError(f"returned a {type(answer).__name__}, expected a string")
    elif hook in ("extra_requests", "extra_allocatable"):
        answer = dict(answer)
        if not all(isinstance(k, str) and isinstance(v, int) for k, v in answer.items()):
            raise TypeError("expected a mapping of resource names to integers")
    return answer


@dataclass(frozen=True)
class PluginFailures:
    """The filter that refuses every node to a pod a guarded user plugin fails on (any of its
    hooks about the pod alone but its filter, which refuses the pod itself), the failure as the
    whole reason (as an Error status of a kube-scheduler Filter is), and every pod to a node a
    guarded part's build failed on (a score or constraint part has no filter of its own to refuse
    it), with that failure as the node's reason; the verifier checks it too."""

    guarded: tuple[Guarded, ...]
    name: str = "UserPluginFailures"
    reason: str = "a user plugin failed for the pod"

    def failure(self, pod: Pod) -> str:
        return next((m for g in self.guarded if (m := g.pod_failure(pod))), "")

    def node_failure(self, node: Node) -> str:
        return next((g.faults.nodes[node.name] for g in self.guarded if node.name in g.faults.nodes), "")

    def pod_key(self, pod: Pod) -> Hashable:
        return self.failure(pod)

    def node_key(self, node: Node) -> Hashable:
        return self.node_failure(node)

    def filter(self, pod: Pod, nodes: Sequence[Node]) -> BoolArray:
        if self.failure(pod):
            return np.zeros(len(nodes), dtype=np.bool_)
        return np.array([not self.node_failure(n) for n in nodes], dtype=np.bool_)

    def node_reasons(self, pod: Pod, nodes: Sequence[Node]) -> list[tuple[str, ...]]:
        return [(m,) if (m := self.node_failure(n)) else () for n in nodes]

    def filter_error(self, pod: Pod) -> str:
        return self.failure(pod)


ATTRIBUTION_BUILDS = 64
"""The most builds spent finding the objects a failing build fails on, per plugin and run: halving
finds each in about 2 log2(n) builds (n pods or nodes); beyond it the build's failure is whole."""


def guarded_factory(factory: PluginFactory, faults: dict[str, Faults] | None = None) -> PluginFactory:
    """``factory`` whose build, when it fails on this run's snapshot, is built again without the
    pending pods and nodes it fails on (:func:`attributed_build`), those filed in ``faults`` under
    the plugin's name; PluginError (one line naming the plugin) when no such objects are found."""
    build = factory.build

    def guarded_build(args: Any, ctx: RunContext) -> Any:
        built, found = attributed_build(factory.name, lambda c: build(args, c), ctx)
        if faults is not None and (found.pods or found.nodes):
            faults[factory.name] = found
        return built

    return PluginFactory(factory.name, factory.point, factory.args_type, guarded_build)


class _OverBudget(Exception):
    pass


def attributed_build(name: str, build: Callable[[RunContext], Any], ctx: RunContext) -> tuple[Any, Faults]:
    """``build(ctx)``, or when it raises, the build on the snapshot without the pending pods (and
    then the nodes with their bound pods) it fails on, found by halving, and those objects with
    the failure; PluginError when the build fails without any pending pod on every node, or when
    finding them takes more than ``ATTRIBUTION_BUILDS`` builds."""
    try:
        return build(ctx), NO_FAULTS
    except Exception as e:  # the user's code: find what it fails on
        error = e
    whole = PluginError(f"plugin '{name}' failed to build: {type(error).__name__}: {error}")
    snapshot = ctx.snapshot
    budget = [ATTRIBUTION_BUILDS]

    def works(pending: Sequence[Pod], nodes: Sequence[Node]) -> bool:
        if budget[0] <= 0:
            raise _OverBudget
        budget[0] -= 1
        names = {n.name for n in nodes}
        try:
            build(replace(ctx, snapshot=replace(snapshot, pending=tuple(pending), nodes=tuple(nodes),
                                                bound=tuple(p for p in snapshot.bound if p.node_name in names))))
        except Exception:  # the user's code: this part of the snapshot fails it
            return False
        return True

    try:
        bad_nodes: list[Node] = []
        if not works((), snapshot.nodes):
            bad_nodes = _culprits(list(snapshot.nodes), lambda kept: works((), kept), failing=True)
            if len(bad_nodes) == len(snapshot.nodes):
                raise whole from None
        gone = {n.name for n in bad_nodes}
        nodes = [n for n in snapshot.nodes if n.name not in gone]
        bad_pods = _culprits(list(snapshot.pending), lambda kept: works(kept, nodes), failing=not bad_nodes)
    except _OverBudget:
        raise whole from None
    refused = {id(p) for p in bad_pods}
    left = replace(snapshot, pending=tuple(p for p in snapshot.pending if id(p) not in refused), nodes=tuple(nodes),
                   bound=tuple(p for p in snapshot.bound if p.node_name not in gone))
    try:
        built = build(replace(ctx, snapshot=left))
    except Exception:  # the user's code, failing on what it built without: no one object's fault
        raise whole from None
    message = failure(name, "build", error)
    return built, Faults({p.key: message for p in bad_pods}, {n.name: message for n in bad_nodes})


def _culprits(items: list[T], works: Callable[[list[T]], bool], failing: bool = False) -> list[T]:
    """The items without which ``works`` holds (it holds on none), found by halving: those that
    fail it each alone, or with others kept, in ``items``' order. ``failing``: it is known not to
    hold on all of them."""

    def search(candidates: list[T], kept: list[T]) -> list[T]:
        if not candidates or (not (failing and candidates is items) and works(kept + candidates)):
            return []
        if len(candidates) == 1:
            return candidates
        first, second = candidates[: len(candidates) // 2], candidates[len(candidates) // 2:]
        bad = search(first, kept)
        return bad + search(second, kept + [c for c in first if all(c is not b for b in bad)])  # (few bad)

    return search(items, [])


def guard(factory: PluginFactory, part: Any, faults: Faults = NO_FAULTS) -> Guarded:
    """``part`` of a user plugin behind the guard (refusing ``faults``, what its build failed on);
    PluginError when its ``name`` or (for a filter) its ``reason`` cannot be read as a string."""
    try:
        name = part.name
        reason = part.reason if not missing_members(part, FILTER) else ""
        if not isinstance(name, str) or not isinstance(reason, str):
            raise TypeError("name and reason must be strings")
    except Exception as e:  # the user's code: one line
        raise PluginError(f"plugin '{factory.name}': {type(e).__name__}: {e}") from None
    return Guarded(part, name, reason, faults=faults)


def with_failures(plugins: PluginSet) -> PluginSet:
    """``plugins`` with the filter that refuses the pods their guarded parts fail on, when any."""
    parts = (*plugins.filters, *plugins.scores, *plugins.constraints, *plugins.limits)
    guarded = tuple({id(p): p for p in parts if isinstance(p, Guarded)}.values())
    if not guarded:
        return plugins
    return replace(plugins, filters=(*plugins.filters, PluginFailures(guarded)))
