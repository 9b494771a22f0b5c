"""The openb converter and the `kubeplace openb convert` / `kubeplace bench openb` commands."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kubeplace.kube.errors import InputError
from kubeplace.kube.files import load_snapshot
from kubeplace_bench.commands import bench, openb
from kubeplace_bench.openb import (
    DEVICE_ALLOCATED,
    GPU,
    KOORD_CORE,
    KOORD_MEMORY,
    MODEL_LABEL,
    Names,
    kube_name,
    manifests,
    pod_manifest,
    read_nodes,
    read_pods,
    write_manifests,
)

NODES = """sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,32000,262144,0,
openb-node-0001,96000,393216,8,G2
openb-node-0002,32000,131072,4,V100M32
"""
PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0000,12000,16384,2,1000,,LS,Running,0,12537496,0
openb-pod-0001,6000,12288,1,460,,LS,Succeeded,427061,12902960,427061
openb-pod-0002,4000,8192,1,1000,V100M16|V100M32|V100M32,BE,Pending,500000,,
openb-pod-0003,8000,4096,0,0,,Burstable,Failed,600000,700000,600000
"""
MULTIGPU = """name,cpu_milli,memory_mib,num_gpu,gpu_milli
openb-pod-0000,12000,16384,1,1000
openb-pod-0001,6000,12288,1,460
openb-pod-0002,88000,327680,8,1000
"""
NOMEM = """name,cpu_milli,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0000,12000,1,1000,,LS,Running,0,12537496,0
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_reads_nodes_and_pods(tmp_path: Path) -> None:
    nodes = read_nodes(write(tmp_path, "nodes.csv", NODES))
    pods = read_pods(write(tmp_path, "pods.csv", PODS))
    assert [(n.name, n.cpu, n.mem, n.gpus, n.model) for n in nodes] == [
        ("openb-node-0000", 32000, 262144, 0, ""), ("openb-node-0001", 96000, 393216, 8, "G2"),
        ("openb-node-0002", 32000, 131072, 4, "V100M32")]
    whole, share, spec, cpu = pods
    assert (whole.num_gpu, whole.gpu_milli, whole.models) == (2, 1000, ())
    assert (share.num_gpu, share.gpu_milli, share.is_share) == (1, 460, True)
    # as written: FGD's typical pods key shapes by the gpu_spec string, repeats included
    assert spec.models == ("V100M16", "V100M32", "V100M32")
    assert (cpu.num_gpu, cpu.gpu_milli, cpu.creation, cpu.phase) == (0, 0, 600000, "Failed")


def test_node_manifests(tmp_path: Path) -> None:
    node_docs, _ = manifests(read_nodes(write(tmp_path, "nodes.csv", NODES)), [])
    cpu_node, g2, _ = node_docs
    assert cpu_node["status"]["allocatable"] == {"cpu": "32000m", "memory": "262144Mi", "pods": "1000"}
    assert MODEL_LABEL not in cpu_node["metadata"]["labels"]
    assert g2["status"]["allocatable"] == {"cpu": "96000m", "memory": "393216Mi", "pods": "1000", GPU: "8",
                                           KOORD_CORE: "800", KOORD_MEMORY: "800"}
    assert g2["metadata"]["labels"][MODEL_LABEL] == "G2"


def test_pod_manifests(tmp_path: Path) -> None:
    _, pod_docs = manifests([], read_pods(write(tmp_path, "pods.csv", PODS)))
    whole, share, spec, cpu = pod_docs
    for doc in pod_docs:
        assert doc["metadata"]["namespace"] == "openb"
        assert doc["spec"]["schedulerName"] == "kubeplace"
        assert "nodeName" not in doc["spec"]
        assert doc["status"]["phase"] == "Pending"  # whatever the trace's phase
    res = whole["spec"]["containers"][0]["resources"]
    assert res["requests"] == {"cpu": "12000m", "memory": "16384Mi", GPU: "2"} and res["limits"] == {GPU: "2"}
    res = share["spec"]["containers"][0]["resources"]
    assert res["requests"] == {"cpu": "6000m", "memory": "12288Mi", KOORD_CORE: "46", KOORD_MEMORY: "46"}
    assert GPU not in res["limits"]
    term = spec["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": MODEL_LABEL, "operator": "In", "values": ["V100M16", "V100M32"]}]}]
    assert "limits" not in cpu["spec"]["containers"][0]["resources"]
    stamps = [d["metadata"]["creationTimestamp"] for d in pod_docs]
    assert stamps == sorted(stamps) and stamps[0] == "2023-01-01T00:00:00Z"


def test_written_files_load_as_a_snapshot(tmp_path: Path) -> None:
    nodes = read_nodes(write(tmp_path, "nodes.csv", NODES))
    pods = read_pods(write(tmp_path, "pods.csv", PODS))
    node_file, _ = write_manifests(tmp_path / "out", nodes, pods)
    assert len(list(yaml.safe_load_all(node_file.read_text()))) == 3
    snap = load_snapshot([tmp_path / "out"])
    assert len(snap.nodes) == 3 and len(snap.pending) == 4
    by_name = {p.name: p for p in snap.pending}
    assert by_name["openb-pod-0000"].requests[GPU] == 2
    assert by_name["openb-pod-0001"].requests[KOORD_CORE] == 46


def test_bound_pod_carries_koordinator_devices(tmp_path: Path) -> None:
    share = read_pods(write(tmp_path, "pods.csv", PODS))[1]
    doc = pod_manifest(share, node="openb-node-0001", devices=(3,))
    assert doc["spec"]["nodeName"] == "openb-node-0001" and doc["status"]["phase"] == "Running"
    assert json.loads(doc["metadata"]["annotations"][DEVICE_ALLOCATED]) == {
        "gpu": [{"minor": 3, "resources": {KOORD_CORE: "46", KOORD_MEMORY: "46"}}]}


def test_multigpu_five_columns(tmp_path: Path) -> None:
    pods = read_pods(write(tmp_path, "multigpu.csv", MULTIGPU))
    assert [(p.num_gpu, p.gpu_milli, p.models, p.creation) for p in pods] == [
        (1, 1000, (), 0), (1, 460, (), 1), (8, 1000, (), 2)]
    _, docs = manifests([], pods)
    assert docs[2]["spec"]["containers"][0]["resources"]["requests"][GPU] == "8"


def test_nomem_gives_memory_zero(tmp_path: Path) -> None:
    (pod,) = read_pods(write(tmp_path, "nomem.csv", NOMEM))
    assert pod.mem == 0


@pytest.mark.parametrize(("text", "where"), [
    (PODS.replace("openb-pod-0001,6000", "openb-pod-0001,6k"), "pods.csv:3: cpu_milli: '6k' is not an integer"),
    (PODS.replace(",460,", ",455,"), "pods.csv:3: gpu_milli: gpu_milli 455 is not a multiple of 10"),
    (PODS.replace("openb-pod-0003,8000,4096,0,0", "openb-pod-0003,8000,4096,0,500"), "pods.csv:5: gpu_milli"),
    (PODS.replace("openb-pod-0000,12000,16384,2,1000", "openb-pod-0000,12000,16384,2,500"), "pods.csv:2: gpu_milli"),
    (PODS.replace("openb-pod-0002,4000", "openb-pod-0000,4000"), "pods.csv:4: name: duplicate pod name"),
    (PODS.replace("gpu_milli,", "gpu_share,", 1), "pods.csv:1: missing column(s) gpu_milli"),
    (PODS + "openb-pod-0009,1\n", "pods.csv:6: 2 fields"),
])
def test_bad_pod_csv_names_file_line_and_column(tmp_path: Path, text: str, where: str) -> None:
    with pytest.raises(InputError) as err:
        read_pods(write(tmp_path, "pods.csv", text))
    assert where in str(err.value)


def test_bad_node_csv(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nodes.csv:3: gpu: '-1' is not an integer|nodes.csv:3: gpu: -1 is negative"):
        read_nodes(write(tmp_path, "nodes.csv", NODES.replace("393216,8,G2", "393216,-1,G2")))


def test_invalid_names_are_cleaned_reversibly() -> None:
    assert kube_name("openb-pod-0001") == "openb-pod-0001"
    cleaned = kube_name("Pod_A")
    assert cleaned.startswith("pod-a-") and cleaned != kube_name("pod_a")
    from kubeplace_bench.gpusim import PodSpec

    assert Names.of([], [PodSpec("Pod_A", 1, 1)]).pods == {cleaned: "Pod_A"}


def test_convert_command(tmp_path: Path) -> None:
    nodes, pods = write(tmp_path, "nodes.csv", NODES), write(tmp_path, "pods.csv", PODS)
    result = CliRunner().invoke(openb, ["convert", "--nodes", str(nodes), "--pods", str(pods),
                                        "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "nodes.yaml").exists() and (tmp_path / "out" / "pods.yaml").exists()


def test_convert_command_bad_csv_exits_2(tmp_path: Path) -> None:
    nodes = write(tmp_path, "nodes.csv", NODES)
    pods = write(tmp_path, "pods.csv", PODS.replace("openb-pod-0001,6000", "openb-pod-0001,x"))
    result = CliRunner().invoke(openb, ["convert", "--nodes", str(nodes), "--pods", str(pods),
                                        "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "pods.csv:3: cpu_milli" in result.output


def test_bench_openb_json_shape(tmp_path: Path) -> None:
    nodes, pods = write(tmp_path, "nodes.csv", NODES), write(tmp_path, "pods.csv", PODS)
    out = tmp_path / "placements.csv"
    result = CliRunner().invoke(bench, ["openb", "--nodes", str(nodes), "--pods", str(pods), "--time-limit", "1",
                                        "-o", "json", "--placements-out", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert set(doc["lp_bound"]) == {"gpu_milli", "pods"}
    assert doc["input"] == {"nodes": 3, "pods": 4, "gpus": 12, "node_file": str(nodes), "pod_file": str(pods)}
    assert list(doc["policies"]) == ["kubeplace", "default-scheduler", "best-fit", "fgd", "fgd-steered"]
    for figures in doc["policies"].values():
        assert {"pods_placed", "gpu_milli_placed", "gpu_alloc_ratio", "cpu_milli_placed", "seconds", "peak_mib",
                "fragmentation_ratio"} <= set(figures)
        assert figures["gpu_milli_placed"] <= doc["lp_bound"]["gpu_milli"]
    assert doc["policies"]["kubeplace"]["failures"] == 0
    rows = list(csv.reader(out.read_text().splitlines()))
    assert rows[0] == ["pod", "node", "gpus"] and len(rows) == 1 + doc["policies"]["kubeplace"]["pods_placed"]
    table = CliRunner().invoke(bench, ["openb", "--nodes", str(nodes), "--pods", str(pods), "--time-limit", "1"])
    assert table.exit_code == 0 and "% of LP bound" in table.output


def test_bench_openb_replay_profile(tmp_path: Path) -> None:
    nodes, pods = write(tmp_path, "nodes.csv", NODES), write(tmp_path, "pods.csv", PODS)
    args = ["openb-replay", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "1", "--window", "2",
            "--time-limit", "0.2", "--policies", "kubeplace,fgd"]
    result = CliRunner().invoke(bench, [*args, "--profile", "balance", "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["input"]["kubeplace_profile"] == "balance" and list(doc["policies"]) == ["kubeplace", "fgd"]
    table = CliRunner().invoke(bench, args)
    assert table.exit_code == 0 and "profile defrag" in table.output
    wrong = CliRunner().invoke(bench, [*args, "--profile", "fastest"])
    assert wrong.exit_code == 2 and "'fastest' is not one of" in wrong.output
