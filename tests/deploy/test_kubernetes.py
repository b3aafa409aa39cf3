"""deploy/kubernetes: the Kustomize base and overlays, rendered by a real kustomize and
validated strictly against the Kubernetes schemas, then held to what kstream needs.

No cluster runs here: `kustomize build` renders each directory, `kubernetes-validate`
checks every document against the newest Kubernetes version its schemas carry, in
strict mode (an unknown field fails), and the checks below read the rendered
objects. The renderer is `KSTREAM_KUSTOMIZE`, else ``kustomize`` on PATH, else one
installed by ``scripts/kustomize`` (as ``.ci/run`` does), else ``kubectl kustomize``;
without any the tests skip with one line, unless ``KSTREAM_REQUIRE_KUSTOMIZE=1``
(set by ``.ci/run``), where that is a failure. Cost: about two seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import typer
import yaml
from typer.testing import CliRunner

from kstream.dataflow.plan import plan
from kstream.tools.cli import app
from kstream.tools.spec import load_job

pytestmark = pytest.mark.deploy

ROOT = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
BASE, OBJECT_STORE = ROOT / "base", ROOT / "overlays" / "object-store"
KUSTOMIZATIONS = [BASE, OBJECT_STORE]
POD_INDEX = "metadata.labels['apps.kubernetes.io/pod-index']"
UID = 10001

Doc = dict[str, Any]


def renderer() -> list[str] | None:
    """The command that renders a kustomization directory given as its last argument."""
    if given := os.environ.get("KSTREAM_KUSTOMIZE"):
        return [given, "build"]
    if found := shutil.which("kustomize"):
        return [found, "build"]
    cached = sorted(Path.home().glob(".cache/kstream/kustomize/*/kustomize"))
    if cached:
        return [str(cached[-1]), "build"]
    if found := shutil.which("kubectl"):
        return [found, "kustomize"]
    return None


@pytest.fixture(scope="session")
def kustomize() -> list[str]:
    command = renderer()
    if command is None:
        message = "no kustomize (KSTREAM_KUSTOMIZE, PATH, scripts/kustomize, kubectl): not rendered"
        if os.environ.get("KSTREAM_REQUIRE_KUSTOMIZE") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return command


@dataclass(frozen=True)
class Rendered:
    """The documents one kustomization renders to."""

    docs: list[Doc]

    def of(self, kind: str) -> list[Doc]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str) -> Doc:
        found = [d for d in self.of(kind) if d["metadata"]["name"] == name]
        assert len(found) == 1, f"{len(found)} {kind} named {name}"
        return found[0]

    def config_map(self, prefix: str) -> Doc:
        """The generated ConfigMap named `prefix` (kustomize adds a hash suffix)."""
        found = [d for d in self.of("ConfigMap") if d["metadata"]["name"].startswith(prefix)]
        assert len(found) == 1, f"{len(found)} ConfigMaps named {prefix}-..."
        return found[0]

    def workloads(self) -> Iterator[Doc]:
        yield from self.of("Deployment")
        yield from self.of("StatefulSet")

    def settings(self, workload: Doc) -> dict[str, str]:
        """The variables `workload`'s one container takes from ConfigMaps (envFrom)."""
        values: dict[str, str] = {}
        for source in container(workload).get("envFrom", []):
            if "configMapRef" in source:
                name = source["configMapRef"]["name"]
                values |= self.one("ConfigMap", name)["data"]
        return values


_rendered: dict[Path, Rendered] = {}


def render(kustomize: list[str], directory: Path) -> Rendered:
    if directory not in _rendered:
        done = subprocess.run(
            [*kustomize, str(directory)], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{kustomize} {directory}: {done.stderr.strip()}"
        docs = [d for d in yaml.safe_load_all(done.stdout) if d]
        assert docs, f"{directory} rendered nothing"
        _rendered[directory] = Rendered(docs)
    return _rendered[directory]


def container(workload: Doc) -> Doc:
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, f"{workload['metadata']['name']}: one container expected"
    return dict(containers[0])


def expand(args: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' $(NAME) expansion of a container's arguments."""
    out = []
    for arg in args:
        for name, value in env.items():
            arg = arg.replace(f"$({name})", value)
        assert "$(" not in arg, f"{arg}: a variable no ConfigMap defines"
        out.append(arg)
    return out


def parse(args: list[str]) -> dict[str, Any]:
    """`args` parsed (and checked by every option's callback) as the kstream command line
    does, without running the command: an option the CLI does not know fails here."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    command = group.commands[args[0]]
    with command.make_context(args[0], list(args[1:])) as context:
        return dict(context.params)


# -- the schemas ------------------------------------------------------------------------


def test_the_schemas_are_recent_enough_for_the_pod_index_label() -> None:
    major, minor = (int(n) for n in kubernetes_validate.latest_version().split(".")[:2])
    assert (major, minor) >= (1, 28)


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda p: p.name)
def test_every_document_validates_strictly(kustomize: list[str], directory: Path) -> None:
    target = kubernetes_validate.latest_version()
    for doc in render(kustomize, directory).docs:
        kubernetes_validate.validate(doc, target, strict=True)


def test_strict_validation_refuses_an_unknown_field(kustomize: list[str]) -> None:
    (statefulset,) = render(kustomize, BASE).of("StatefulSet")
    planted = {**statefulset, "spec": {**statefulset["spec"], "podIndexFrom": "label"}}
    with pytest.raises(kubernetes_validate.ValidationError, match="podIndexFrom"):
        kubernetes_validate.validate(planted, kubernetes_validate.latest_version(), strict=True)


# -- what kstream needs -------------------------------------------------------------------


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda p: p.name)
def test_workers_are_a_parallel_statefulset_whose_pod_index_is_the_worker_index(
    kustomize: list[str], directory: Path
) -> None:
    rendered = render(kustomize, directory)
    (workers,) = rendered.of("StatefulSet")
    assert workers["spec"]["podManagementPolicy"] == "Parallel"
    service = rendered.one("Service", workers["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    worker = container(workers)
    index = [e for e in worker["env"] if e["name"] == "KSTREAM_WORKER"]
    from_pod_index = {"fieldRef": {"fieldPath": POD_INDEX}}
    assert index == [{"name": "KSTREAM_WORKER", "valueFrom": from_pod_index}]
    settings = rendered.settings(workers)
    args = expand(worker["args"], settings)
    assert args[0] == "worker"
    assert "--worker" not in args  # the pod index, not a fixed one
    # The same count as the coordinator's, and as many pods.
    assert int(settings["KSTREAM_WORKERS"]) == workers["spec"]["replicas"]


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda p: p.name)
def test_one_coordinator_recreated_never_rolled_with_a_liveness_probe_on_its_loop(
    kustomize: list[str], directory: Path, tmp_path: Path
) -> None:
    rendered = render(kustomize, directory)
    (coordinator,) = rendered.of("Deployment")
    assert coordinator["spec"]["replicas"] == 1
    assert coordinator["spec"]["strategy"] == {"type": "Recreate"}
    main = container(coordinator)
    args = expand(main["args"], rendered.settings(coordinator))
    assert args[0] == "run"
    assert "--no-spawn" in args
    alive = args[args.index("--liveness-file") + 1]
    assert alive.startswith("/tmp/")  # an emptyDir: the root file system is read-only
    for probe in ("startupProbe", "livenessProbe"):
        command = main[probe]["exec"]["command"]
        assert command[:3] == ["kstream", "alive", alive], probe
        # The probe is a command the CLI runs: it passes on a fresh file, fails without one.
        fresh = tmp_path / "alive"
        fresh.touch()
        runner = CliRunner()
        assert runner.invoke(app, [*command[1:2], str(fresh), *command[3:]]).exit_code == 0
        fresh.unlink()
        assert runner.invoke(app, [*command[1:2], str(fresh), *command[3:]]).exit_code == 1


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda p: p.name)
def test_coordinator_and_workers_run_one_job_with_one_setting_each(
    kustomize: list[str], directory: Path, tmp_path: Path
) -> None:
    rendered = render(kustomize, directory)
    (coordinator,) = rendered.of("Deployment")
    (workers,) = rendered.of("StatefulSet")
    run = parse(expand(container(coordinator)["args"], rendered.settings(coordinator)))
    settings = rendered.settings(workers)
    worker = parse(expand(container(workers)["args"], settings))
    for option in ("spec", "param", "checkpoint_storage", "state_dir"):
        assert run[option] == worker[option], option
    assert run["spawn"] is False
    # The job module the ConfigMap mounts loads and plans for that many workers.
    job_map = rendered.config_map("kstream-job")
    (module,) = job_map["data"]
    source = tmp_path / module
    source.write_text(job_map["data"][module])
    name, attribute = run["spec"].split(":")
    assert name == module.removesuffix(".py")
    job = load_job(f"{source}:{attribute}", dict(p.split("=", 1) for p in run["param"]))
    assert plan(job, int(settings["KSTREAM_WORKERS"])).tasks


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda p: p.name)
def test_every_process_serves_metrics_on_the_port_its_pod_declares_for_scraping(
    kustomize: list[str], directory: Path
) -> None:
    rendered = render(kustomize, directory)
    for workload in rendered.workloads():
        name = workload["metadata"]["name"]
        main = container(workload)
        options = parse(expand(main["args"], rendered.settings(workload)))
        ports = {p["name"]: p["containerPort"] for p in main["ports"]}
        assert options["metrics_port"] == ports["metrics"], name
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true", name
        assert annotations["prometheus.io/port"] == str(ports["metrics"]), name


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=lambda p: p.name)
def test_every_container_is_bounded_unprivileged_and_runs_this_version(
    kustomize: list[str], directory: Path
) -> None:
    rendered = render(kustomize, directory)
    for workload in rendered.workloads():
        name = workload["metadata"]["name"]
        pod = workload["spec"]["template"]["spec"]
        main = container(workload)
        assert main["image"] == f"kstream/kstream:{version('kstream')}", name
        for bound in ("requests", "limits"):
            assert set(main["resources"][bound]) >= {"cpu", "memory"}, (name, bound)
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] == UID, name
        security = main["securityContext"]
        assert security["readOnlyRootFilesystem"] is True, name
        assert security["allowPrivilegeEscalation"] is False, name
        assert security["capabilities"]["drop"] == ["ALL"], name
        mounts = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        # Everything kstream writes outside the checkpoint store: emptyDirs.
        for path in ("/tmp", "/var/lib/kstream"):
            assert "emptyDir" in volumes[mounts[path]], (name, path)
        assert "configMap" in volumes[mounts["/opt/kstream/jobs"]], name
        # Kafka security: a file from a Secret, named where kstream looks for it.
        secret = volumes[mounts["/etc/kstream/kafka"]]["secret"]["secretName"]
        assert rendered.one("Secret", secret)["data"]
        env = {e["name"]: e.get("value") for e in main["env"]}
        assert env["KSTREAM_KAFKA_CONFIG"].startswith("/etc/kstream/kafka/")


def test_the_base_keeps_checkpoints_on_a_read_write_many_claim(kustomize: list[str]) -> None:
    rendered = render(kustomize, BASE)
    (claim,) = rendered.of("PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    for workload in rendered.workloads():
        settings = rendered.settings(workload)
        assert settings["CHECKPOINT_STORAGE"] == "file:///mnt/checkpoints"
        mounts = {m["mountPath"]: m["name"] for m in container(workload)["volumeMounts"]}
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
        claimed = volumes[mounts["/mnt/checkpoints"]]["persistentVolumeClaim"]["claimName"]
        assert claimed == claim["metadata"]["name"]


def test_the_object_store_overlay_keeps_checkpoints_in_s3_with_credentials_from_a_secret(
    kustomize: list[str],
) -> None:
    rendered = render(kustomize, OBJECT_STORE)
    assert rendered.of("PersistentVolumeClaim") == []
    for workload in rendered.workloads():
        name = workload["metadata"]["name"]
        settings = rendered.settings(workload)
        assert settings["CHECKPOINT_STORAGE"].startswith("s3://"), name
        assert settings["AWS_ENDPOINT_URL"], name
        main = container(workload)
        assert {"secretRef": {"name": "kstream-s3"}} in main["envFrom"], name
        assert "/mnt/checkpoints" not in {m["mountPath"] for m in main["volumeMounts"]}, name
        pod = workload["spec"]["template"]["spec"]
        assert all("persistentVolumeClaim" not in v for v in pod["volumes"]), name
