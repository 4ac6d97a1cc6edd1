"""Kubernetes launcher: a manifest with an indexed Job (one pod per node, completionMode Indexed)
and a headless Service that gives each pod a DNS name, so every pod's torchrun agent can meet
at pod 0 (`<job>-0.<job>:<port>`). Pod i runs `trainclock run ... --node-rank i`.

Results: rank 0 (in pod 0) writes the MLPerf log under /results, a PersistentVolumeClaim that
outlives the pods. The manifest creates the claim `<job>-results` (ReadWriteMany, since every pod
mounts the same template, possibly on different nodes), or mounts an existing claim given by
name. An emptyDir would lose the log with the pod.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from trainclock.distributed.slurm import check_shape  # shared by both launchers
from trainclock.errors import UsageError

RESULTS_MOUNT = "/results"
_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")  # a DNS-1123 label
# the pods' hostnames, `<job>-<index>`, must fit in a 63-character label
_MAX_JOB_NAME = 52
_QUANTITY = re.compile(r"\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?")


@dataclass(frozen=True)
class K8sJob:
    benchmark: str
    nodes: int
    gpus_per_node: int  # processes per pod: one per GPU (with device "cpu", CPU processes)
    image: str  # a container image with trainclock installed
    run_args: tuple[str, ...] = ()  # further `trainclock run` arguments, passed unchanged
    namespace: str = "default"
    device: str = "cuda"  # "cpu" asks for no GPUs
    port: int = 29500
    job_name: str | None = None
    results_claim: str | None = None  # an existing PersistentVolumeClaim; None: the manifest makes one
    results_size: str = "10Gi"
    storage_class: str | None = None

    @property
    def name(self) -> str:
        return self.job_name or re.sub(r"[^a-z0-9-]+", "-", f"trainclock-{self.benchmark}".lower()).strip("-")

    @property
    def claim(self) -> str:
        return self.results_claim or f"{self.name}-results"

    @property
    def rendezvous(self) -> str:
        # pod 0's DNS name through the headless Service (the Service is named after the Job)
        return f"{self.name}-0.{self.name}:{self.port}"


def check(job: K8sJob) -> None:
    """Every problem a job description can have, as a one-line UsageError."""
    check_shape(job.nodes, job.gpus_per_node, job.device, job.port, "Kubernetes")
    if not job.image or any(c.isspace() for c in job.image):
        raise UsageError(f"--image must name a container image with trainclock installed, got {job.image!r}")
    for flag, value, longest in (("--job-name", job.name, _MAX_JOB_NAME), ("--namespace", job.namespace, 63),
                                 ("--results-claim", job.claim, 63)):
        if not _NAME.fullmatch(value) or len(value) > longest:
            raise UsageError(f"{flag} {value!r} is not a valid Kubernetes name; use at most {longest} lowercase "
                             "letters, digits and '-', starting and ending with a letter or digit")
    if not _QUANTITY.fullmatch(job.results_size):
        raise UsageError(f"--results-size must be a Kubernetes quantity such as 10Gi, got {job.results_size!r}")


def run_command(job: K8sJob) -> list[str]:
    """The command of every pod. Kubernetes itself replaces $(JOB_COMPLETION_INDEX), the pod's
    index that the Job controller puts in its environment, so no shell is needed. The rendezvous
    id is the Job's name: the same in every pod."""
    return ["trainclock", "run", job.benchmark, "--nproc", str(job.gpus_per_node), "--nnodes", str(job.nodes),
            "--node-rank", "$(JOB_COMPLETION_INDEX)", "--rdzv", job.rendezvous, "--run-id", job.name,
            "--device", job.device, "--out", RESULTS_MOUNT, *job.run_args]


def manifest(job: K8sJob) -> list[dict]:
    """The Kubernetes objects, in the order to apply them (checked first)."""
    check(job)
    labels = {"app.kubernetes.io/name": "trainclock", "trainclock/job": job.name}
    meta = {"name": job.name, "namespace": job.namespace, "labels": labels}
    objects = []
    if job.results_claim is None:
        claim_spec = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": job.results_size}}}
        if job.storage_class:
            claim_spec["storageClassName"] = job.storage_class
        objects.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                        "metadata": {**meta, "name": job.claim}, "spec": claim_spec})
    objects.append({
        "apiVersion": "v1", "kind": "Service", "metadata": meta,
        "spec": {
            "clusterIP": "None",  # headless: DNS names for the pods, no load balancing
            "publishNotReadyAddresses": True,  # resolvable as soon as a pod starts, for the rendezvous
            "selector": labels,
            "ports": [{"name": "rendezvous", "port": job.port, "targetPort": job.port}],
        },
    })
    container = {
        "name": "trainclock",
        "image": job.image,
        "command": run_command(job),
        "ports": [{"name": "rendezvous", "containerPort": job.port}],
        "volumeMounts": [{"name": "results", "mountPath": RESULTS_MOUNT},
                         {"name": "shm", "mountPath": "/dev/shm"}],
    }
    if job.device == "cuda":
        container["resources"] = {"limits": {"nvidia.com/gpu": job.gpus_per_node}}
    objects.append({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
        "spec": {
            "completionMode": "Indexed",
            "completions": job.nodes,
            "parallelism": job.nodes,  # all pods at once: the rendezvous waits for every node
            # torchrun restarts workers inside a pod (--max-restarts); a lost pod fails the whole run
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "subdomain": job.name,  # with the Service: pod i is <job>-i.<job>
                    "restartPolicy": "Never",
                    "containers": [container],
                    "volumes": [
                        {"name": "results", "persistentVolumeClaim": {"claimName": job.claim}},
                        # the 64 MiB default /dev/shm is too small for NCCL and data loaders
                        {"name": "shm", "emptyDir": {"medium": "Memory"}},
                    ],
                },
            },
        },
    })
    return objects


def render(job: K8sJob) -> str:
    """The manifest as multi-document YAML, for `kubectl apply -f`."""
    header = (f"# Written by `trainclock launch k8s`: {job.benchmark} on {job.nodes} pod(s) x {job.gpus_per_node} "
              f"process(es). Results: PersistentVolumeClaim {job.claim}, mounted at {RESULTS_MOUNT}.\n")
    return header + yaml.dump_all(manifest(job), Dumper=_PlainDumper, sort_keys=False, default_flow_style=False)


class _PlainDumper(yaml.SafeDumper):
    """Writes a dict used twice (the labels) twice, not as a YAML anchor and alias: plainer to read and edit."""

    def ignore_aliases(self, data) -> bool:
        return True
