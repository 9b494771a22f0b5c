"""`kubeplace serve` with a user plugin whose code fails for one pod: that pod's FailedScheduling
Event says which plugin failed and how, and the other pods are bound in the same cycle (the
guard of models/plugin_guard.py, as in `plan`: tests/cli/test_cli_plugin_failures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeplace.models.config import SolverSettings
from kubeplace.models.config_load import load_configuration
from kubeplace.serve.informer import Store
from kubeplace.serve.loop import Scheduler
from kubeplace.serve.settings import ServeSettings
from tests.builders import node, pod
from tests.cli.test_cli_plugin_failures import HEADER, PLUGIN, module_name
from tests.serve.fakes import Clock, FakeCluster


def _scheduler(tmp_path: Path, nodes: list[dict], pods: list[dict], hook: str | None = None,
               source: str = PLUGIN) -> tuple[Scheduler, FakeCluster]:
    """A scheduler whose only profile enables the user plugin Broken (``source``), args ``hook``,
    on ``nodes`` and pending ``pods``, its queue filled."""
    (tmp_path / f"{module_name(tmp_path)}.py").write_text(source)
    path = tmp_path / "config.yaml"
    args = f"  pluginConfig: [{{name: Broken, args: {{hook: {hook}}}}}]\n" if hook else ""
    path.write_text(HEADER + f"userPlugins:\n- {{name: Broken, import: '{module_name(tmp_path)}:FACTORY'}}\n"
                    "profiles:\n- plugins: {enabled: [Broken]}\n" + args)
    config = load_configuration(path)
    store = Store()
    store.replace("nodes", nodes)
    store.replace("pods", pods)
    cluster = FakeCluster()
    s = Scheduler(cluster, store, config, config.profiles[0], SolverSettings(time_limit=5, workers=1),
                  ServeSettings(batch_window=0, initial_backoff=1, max_backoff=10), clock=Clock())
    s.resync_queue()
    return s, cluster


@pytest.mark.parametrize("hook", ["filter", "pod_key", "unmodelled", "rejection"])
def test_a_plugin_failing_for_one_pod_is_that_pods_reason_and_the_others_are_bound(tmp_path: Path,
                                                                                    hook: str) -> None:
    s, cluster = _scheduler(tmp_path, [node("n1").cpu("4").manifest()],
                            [pod("plain").cpu("1").manifest(), pod("odd").cpu("1").label("special", "true").manifest()],
                            hook)
    report = s.cycle(s.queue.pop_batch(window=0, size=10, timeout=0))
    assert report.bound == ["default/plain"] and [b[0] for b in cluster.bindings] == ["default/plain"]
    (event,) = [e for e in cluster.events if e["involvedObject"]["name"] == "odd"]
    assert event["reason"] == "FailedScheduling"
    assert f"plugin Broken failed: {hook}(): ValueError: {hook} broke" in event["message"], event["message"]


BUILD_FAILS_ON = {
    "pod": "    if any(p.labels.get('special') == 'true' for p in ctx.snapshot.pending):\n"
           "        raise ValueError('build broke')\n",
    "node": "    if any(n.labels.get('special') == 'true' for n in ctx.snapshot.nodes):\n"
            "        raise ValueError('build broke')\n",
}


@pytest.mark.parametrize("fault", sorted(BUILD_FAILS_ON))
def test_a_build_failing_on_one_object_is_its_pods_reason_and_the_others_are_bound(tmp_path: Path,
                                                                                    fault: str) -> None:
    """The build of a plugin for the cycle fails on one pending pod (or one node): that pod is not
    bound, its Event says why, and the other pods are bound in the same cycle (on the other node)."""
    source = PLUGIN.replace("    return Broken(args)", BUILD_FAILS_ON[fault] + "    return Broken(args)")
    odd = pod("odd").cpu("1") if fault == "node" else pod("odd").cpu("1").label("special", "true")
    nodes = [node("n1").cpu("4").manifest(), node("n2").cpu("4").label("special", "true").manifest()]
    pods = [pod("plain").cpu("1").manifest(), pod("other").cpu("3").manifest(), odd.manifest()]
    s, cluster = _scheduler(tmp_path, nodes, pods, source=source)
    report = s.cycle(s.queue.pop_batch(window=0, size=10, timeout=0))
    if fault == "node":  # n2 refused by the plugin: two of the three pods go to n1, the third does not fit
        assert len(report.bound) == 2, report
        assert {b[1] for b in cluster.bindings} == {"n1"}, cluster.bindings
        (left,) = report.unplaced
        (event,) = [e for e in cluster.events if f"default/{e['involvedObject']['name']}" == left]
        assert "1 plugin Broken failed: build(): ValueError: build broke" in event["message"], event["message"]
        return
    assert sorted(report.bound) == ["default/other", "default/plain"], report
    (event,) = [e for e in cluster.events if e["involvedObject"]["name"] == "odd"]
    assert event["reason"] == "FailedScheduling"
    assert "plugin Broken failed: build(): ValueError: build broke" in event["message"], event["message"]


@pytest.mark.parametrize("hook", ["terms", "constraints"])
def test_a_hook_about_the_whole_batch_failing_is_each_pods_reason(tmp_path: Path, hook: str) -> None:
    """A score or constraint plugin failing for the whole batch fails each of its pods as the
    kube-scheduler fails a pod on a plugin's error: the pod's FailedScheduling Event and its unit's
    backoff say which plugin failed and how (not a bare "cycle failed"), and the scheduler goes on."""
    s, cluster = _scheduler(tmp_path, [node("n1").cpu("4").manifest()],
                            [pod("a").cpu("1").manifest(), pod("b").cpu("1").manifest()], hook)
    report = s.cycle(s.queue.pop_batch(window=0, size=10, timeout=0))
    assert not cluster.bindings and sorted(report.unplaced) == ["default/a", "default/b"], report
    why = f"plugin Broken failed: {hook}(): ValueError: {hook} broke"
    assert sorted(e["involvedObject"]["name"] for e in cluster.events if why in e["message"]) == ["a", "b"]
    assert s.queue.sizes()["queue_waiting"] + s.queue.sizes()["queue_unschedulable"] == 2
