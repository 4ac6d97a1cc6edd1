"""The Kubernetes manifest of `trainclock launch k8s`, read back as YAML."""

from __future__ import annotations

import re

import pytest
import yaml

from trainclock.errors import UsageError

from .helpers import run_command


def write_manifest(tmp_path, *extra: str) -> dict[str, dict]:
    path = tmp_path / "job.yaml"
    assert run_command(["launch", "k8s", "gpt3-mini", "--nodes", "4", "--gpus-per-node", "8",
                        "--image", "registry.example/trainclock:1.2", "--namespace", "perf", "--out", str(path),
                        *extra]) == 0
    objects = list(yaml.safe_load_all(path.read_text()))
    return {o["kind"]: o for o in objects}


def pod_index_expanded(command: list[str], index: int) -> list[str]:
    """What Kubernetes runs in pod `index`: it replaces $(VAR) in a command from the container's env."""
    return [re.sub(r"\$\(JOB_COMPLETION_INDEX\)", str(index), part) for part in command]


def test_an_indexed_job_with_one_pod_per_node(tmp_path):
    objects = write_manifest(tmp_path)
    assert list(objects) == ["PersistentVolumeClaim", "Service", "Job"]
    job = objects["Job"]
    assert job["apiVersion"] == "batch/v1" and job["metadata"]["namespace"] == "perf"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["completions"] == 4 and spec["parallelism"] == 4
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "registry.example/trainclock:1.2"
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 8}
    assert pod["restartPolicy"] == "Never"


def test_each_pod_runs_trainclock_with_its_index_as_node_rank(tmp_path):
    objects = write_manifest(tmp_path, "--", "--max-samples", "2048", "--tp", "2")
    name = objects["Job"]["metadata"]["name"]
    command = objects["Job"]["spec"]["template"]["spec"]["containers"][0]["command"]
    for index in range(4):
        assert pod_index_expanded(command, index) == [
            "trainclock", "run", "gpt3-mini", "--nproc", "8", "--nnodes", "4", "--node-rank", str(index),
            "--rdzv", f"{name}-0.{name}:29500", "--run-id", name, "--device", "cuda", "--out", "/results",
            "--max-samples", "2048", "--tp", "2"]


def test_the_rendezvous_name_resolves_through_the_headless_service(tmp_path):
    objects = write_manifest(tmp_path, "--port", "30123")
    service, job = objects["Service"], objects["Job"]
    pod = job["spec"]["template"]
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    # pod i of an indexed Job is named <job>-i; with subdomain = the Service, <job>-i.<service> resolves
    assert pod["spec"]["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["port"] == 30123
    command = pod["spec"]["containers"][0]["command"]
    assert command[command.index("--rdzv") + 1] == f"{job['metadata']['name']}-0.{service['metadata']['name']}:30123"


def test_results_live_on_a_claim_that_outlives_the_pods(tmp_path):
    objects = write_manifest(tmp_path, "--results-size", "50Gi", "--storage-class", "nfs")
    claim = objects["PersistentVolumeClaim"]
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "50Gi"}},
                             "storageClassName": "nfs"}
    pod = objects["Job"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["results"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts == {"results": "/results", "shm": "/dev/shm"}


def test_an_existing_claim_and_cpu_pods(tmp_path):
    objects = write_manifest(tmp_path, "--results-claim", "shared-results", "--device", "cpu", "--job-name", "sweep-a")
    assert "PersistentVolumeClaim" not in objects  # the existing claim is used, not made
    pod = objects["Job"]["spec"]["template"]["spec"]
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "shared-results"
    assert "resources" not in pod["containers"][0]  # no GPUs asked for
    command = pod["containers"][0]["command"]
    assert command[command.index("--rdzv") + 1] == "sweep-a-0.sweep-a:29500"


def test_the_manifest_is_plain_yaml_without_anchors(tmp_path):
    write_manifest(tmp_path)
    text = (tmp_path / "job.yaml").read_text()
    assert "&id" not in text and "*id" not in text
    assert text.startswith("# Written by `trainclock launch k8s`")


@pytest.mark.parametrize("flags, problem", [
    (["--nodes", "0"], "--nodes must be at least 1, got 0"),
    (["--gpus-per-node", "0"], "--gpus-per-node must be at least 1, got 0"),
    (["--job-name", "Big_Job"], "--job-name 'Big_Job' is not a valid Kubernetes name"),
    (["--job-name", "j" * 53], "use at most 52 lowercase"),
    (["--namespace=-perf"], "--namespace '-perf' is not a valid Kubernetes name"),
    (["--results-size", "lots"], "--results-size must be a Kubernetes quantity such as 10Gi"),
    (["--image", "my image"], "--image must name a container image"),
    (["--", "--node-rank", "1"], "--node-rank is set by this command"),
])
def test_bad_input_is_one_line_naming_the_problem(tmp_path, flags, problem):
    cut = flags.index("--") if "--" in flags else len(flags)
    argv = ["launch", "k8s", "gpt3-mini", "--nodes", "2", "--gpus-per-node", "8", "--image", "img",
            "--out", str(tmp_path / "m.yaml"), *flags[:cut], *flags[cut:]]
    with pytest.raises(UsageError) as raised:
        run_command(argv)
    assert problem in str(raised.value) and "\n" not in str(raised.value)
    assert not (tmp_path / "m.yaml").exists()
