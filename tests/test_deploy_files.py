"""deploy/: the Containerfile, the compose file, the nginx config, the Kubernetes manifests and
the Slurm script hold together: every `gpuarena ...` they run is a real command with real
options, every file they name exists, every image target they build is in the Containerfile,
every GPUARENA_* variable they set is one gpuarena (or the images' entry point) reads, and no
token or password is given on a command line. Nothing is built or started here
(bench/results/image-build-cpu-vm.md records a build and a run)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from conftest import ROOT
from gpuarena.cli.app import app

pytestmark = pytest.mark.quick

DEPLOY = ROOT / "deploy"
CONTAINERFILE = DEPLOY / "Containerfile"
KUBERNETES = DEPLOY / "kubernetes"
SBATCH = DEPLOY / "slurm" / "runner.sbatch"
ENTRYPOINT = DEPLOY / "entrypoint.sh"
IMAGE_TARGETS = {"gpuarena-server": "server", "gpuarena-runner": "runner", "gpuarena-runner-cpu": "runner-cpu"}
"""The images the files run, and the Containerfile target each is built from (scripts/image.sh's tags)."""
FILE_VARIABLES = {"GPUARENA_DATABASE_URL_FILE", "GPUARENA_SECRET_KEY_FILE"}
"""Read by the images' entry point (deploy/entrypoint.sh), not by gpuarena itself."""


# helpers


def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def _manifests() -> list[tuple[Path, dict[str, Any]]]:
    found = []
    for path in sorted(KUBERNETES.glob("*.yaml")):
        found += [(path, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return found


def _kind(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in _manifests() if doc["kind"] == kind]


def _targets() -> set[str]:
    return set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)\s*$", CONTAINERFILE.read_text(), re.MULTILINE | re.IGNORECASE))


def _cli_command(argv: list[str]) -> tuple[Any, list[str]]:
    """The click command argv (the words after `gpuarena`) names, and the rest of argv. (A group
    is told by its `commands`: typer may carry a click of its own, whose classes are not click's.)"""
    command = typer.main.get_command(app)
    words = list(argv)
    while hasattr(command, "commands") and words and not words[0].startswith("-"):
        assert words[0] in command.commands, f"`gpuarena {' '.join(argv)}`: no command {words[0]!r}"
        command = command.commands[words.pop(0)]
    assert not hasattr(command, "commands"), f"`gpuarena {' '.join(argv)}` names a group, not a command"
    return command, words


def assert_real_cli(argv: list[str]) -> None:
    """argv (after `gpuarena`) is a real command whose options all exist, with no token in it."""
    command, rest = _cli_command(argv)
    options = {name for param in command.params for name in (*param.opts, *param.secondary_opts)}
    for word in rest:
        if word.startswith("--"):
            assert word.split("=", 1)[0] in options, f"`gpuarena {' '.join(argv)}`: {command.name} has no {word}"
    assert "--token" not in rest, f"`gpuarena {' '.join(argv)}`: a token on the command line shows in ps"
    assert not any("gpa_" in word for word in rest), f"`gpuarena {' '.join(argv)}` holds a token"


def _cli_variables() -> set[str]:
    """Every environment variable a gpuarena option reads."""
    names: set[str] = set()

    def walk(command: Any) -> None:
        for param in command.params:
            envvar = getattr(param, "envvar", None)
            names.update([envvar] if isinstance(envvar, str) else envvar or [])
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    return names


def assert_known_variables(env: dict[str, Any], where: str) -> None:
    read_by_source = "\n".join(p.read_text() for p in (ROOT / "src" / "gpuarena").rglob("*.py"))
    for name in env:
        if not name.startswith("GPUARENA_"):
            continue
        assert "TOKEN" not in name or name.endswith("_FILE"), f"{where}: {name}: a token goes in a file"
        if name in FILE_VARIABLES:
            assert name.removesuffix("_FILE") in _entrypoint_reads(), (
                f"{where}: deploy/entrypoint.sh does not read {name}"
            )
        else:
            assert name in _cli_variables() or f'"{name}"' in read_by_source, f"{where}: gpuarena never reads {name}"


def _entrypoint_reads() -> list[str]:
    """The variables deploy/entrypoint.sh sets from NAME_FILE."""
    return re.search(r"^for name in (.*); do$", ENTRYPOINT.read_text(), re.MULTILINE).group(1).split()


def _compose_env(service: dict[str, Any]) -> dict[str, Any]:
    env = service.get("environment") or {}
    return env if isinstance(env, dict) else dict(item.split("=", 1) for item in env)


def _compose_argv(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else list(command)


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


# the Containerfile


def test_the_containerfile_has_the_targets_and_its_copies_exist():
    assert {"server", "runner", "runner-cpu"} <= _targets()
    text = CONTAINERFILE.read_text()
    for line in re.findall(r"^COPY\s+(?!--from)(.+)$", text, re.MULTILINE):
        sources = [word for word in line.split() if not word.startswith("--")][:-1]
        for source in sources:
            assert (ROOT / source).exists(), f"Containerfile copies {source}, which is not in the repository"
    assert re.search(r"^ARG SERVER_BASE=", text, re.MULTILINE) and re.search(r"^ARG RUNNER_BASE=", text, re.MULTILINE)
    assert "FROM ${SERVER_BASE} AS server" in text and "FROM ${RUNNER_BASE} AS runner" in text
    assert "/api/health" in re.search(r"^HEALTHCHECK.*(?:\n .*)*", text, re.MULTILINE).group(0)
    assert "bubblewrap" in text and "USER gpuarena" in text
    assert "[server,postgres]" in text and "[test" not in text  # the service, not the test extras


def test_the_containerfile_commands_are_real():
    text = CONTAINERFILE.read_text()
    commands = re.findall(r"^CMD\s+(\[.*\])\s*$", text, re.MULTILINE)
    assert len(commands) == 3
    for command in commands:
        assert_real_cli(yaml.safe_load(command))  # a JSON array is YAML
    assert re.findall(r"^ENTRYPOINT\s+(\[.*\])\s*$", text, re.MULTILINE) == ['["gpuarena-entrypoint"]'] * 2
    assert set(_entrypoint_reads()) == {name.removesuffix("_FILE") for name in FILE_VARIABLES}
    assert "/usr/local/bin/gpuarena-entrypoint" in text and 'exec gpuarena "$@"' in ENTRYPOINT.read_text()


def test_the_shell_scripts_parse():
    for script in (SBATCH, DEPLOY / "make-secrets.sh", ROOT / "scripts" / "image.sh"):
        subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)
    subprocess.run(["sh", "-n", str(ENTRYPOINT)], check=True, timeout=30)


def test_image_sh_builds_every_target_the_files_name():
    text = (ROOT / "scripts" / "image.sh").read_text()
    assert "deploy/Containerfile" in text
    for image, target in IMAGE_TARGETS.items():
        assert target in _targets() and re.search(rf"\b{re.escape(target)}\b", text)
        assert image == f"gpuarena-{target}"  # image.sh's default tag


# compose


def test_compose_has_the_services_and_builds_real_targets():
    compose = _compose()
    services = compose["services"]
    assert {"db", "migrate", "api-1", "api-2", "proxy", "runner", "runner-cpu"} <= set(services)
    assert services["runner-cpu"]["profiles"] == ["cpu"] and "profiles" not in services["runner"]
    gpus = services["runner"]["deploy"]["resources"]["reservations"]["devices"]
    assert gpus[0]["driver"] == "nvidia" and "gpu" in gpus[0]["capabilities"]
    for name, service in services.items():
        build = service.get("build")
        if build:
            assert build["target"] in _targets(), f"{name}: no target {build['target']} in the Containerfile"
            assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == CONTAINERFILE
            assert IMAGE_TARGETS[service["image"]] == build["target"], f"{name}: image and target disagree"
    assert services["migrate"]["depends_on"]["db"]["condition"] == "service_healthy"
    for api in ("api-1", "api-2"):
        assert services[api]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_compose_runs_real_gpuarena_commands_without_tokens_on_the_command_line():
    compose = _compose()
    for name, service in compose["services"].items():
        argv = _compose_argv(service)
        text = yaml.safe_dump(service)
        assert "gpa_" not in text and "--token " not in text, f"{name} holds a token"
        if service.get("image", "") in IMAGE_TARGETS:
            assert argv, f"{name}: no command"
            assert_real_cli(argv)
            assert_known_variables(_compose_env(service), f"compose service {name}")
    assert _compose_argv(compose["services"]["migrate"]) == ["db", "upgrade"]
    assert _compose_argv(compose["services"]["api-1"])[:2] == ["serve", "--no-runner"]


def test_compose_secrets_and_files_exist_or_are_made():
    compose = _compose()
    made = (DEPLOY / "make-secrets.sh").read_text()
    for name, secret in compose["secrets"].items():
        path = Path(secret["file"])
        assert path.parts[:2] == (".", "secrets") or path.parts[0] == "secrets", f"secret {name} outside secrets/"
        assert f"secrets/{path.name}" in made, f"make-secrets.sh does not make {path}"
    assert "secrets/" in (DEPLOY / ".gitignore").read_text()
    for name, service in compose["services"].items():
        for secret in service.get("secrets", []):
            assert secret in compose["secrets"], f"{name}: no secret {secret}"
        env = _compose_env(service)
        for key, value in env.items():
            if key.endswith("_FILE"):
                assert value.startswith("/run/secrets/") and value.rsplit("/", 1)[1] in service["secrets"]
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name} mounts {source}, which does not exist"


def test_compose_runners_allow_the_sandbox():
    for name in ("runner", "runner-cpu"):
        service = _compose()["services"][name]
        options = set(service["security_opt"])
        assert {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} <= options
        assert _compose_env(service)["GPUARENA_TOKEN_FILE"] == "/run/secrets/runner_token"


def test_nginx_proxies_to_the_compose_api_servers():
    text = (DEPLOY / "nginx.conf").read_text()
    upstream = set(re.findall(r"^\s*server\s+([\w.-]+):(\d+)", text, re.MULTILINE))
    services = _compose()["services"]
    apis = {name for name, service in services.items() if _compose_argv(service)[:1] == ["serve"]}
    assert upstream == {(name, "8000") for name in apis} and len(apis) == 2
    for name in apis:
        argv = _compose_argv(services[name])
        assert argv[argv.index("--port") + 1] == "8000"
    listen = re.search(r"listen\s+(\d+);", text).group(1)
    assert f"{listen}:{listen}" in services["proxy"]["ports"]
    assert "proxy_buffering off" in text  # the event streams
    assert services["proxy"]["volumes"] == ["./nginx.conf:/etc/nginx/conf.d/default.conf:ro"]


# Kubernetes


def test_kustomization_lists_files_that_exist():
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        assert (KUBERNETES / resource).is_file(), f"kustomization.yaml names {resource}, which does not exist"
    assert "secrets.example.yaml" not in kustomization["resources"]  # placeholders are never applied
    assert {image["name"] for image in kustomization["images"]} == {"gpuarena-server", "gpuarena-runner"}


def test_kubernetes_has_the_workloads():
    (api,) = [d for d in _kind("Deployment") if d["metadata"]["name"] == "gpuarena-api"]
    assert api["spec"]["replicas"] == 2
    (service,) = _kind("Service")
    assert service["spec"]["selector"] == api["spec"]["template"]["metadata"]["labels"]
    assert api["spec"]["selector"]["matchLabels"] == api["spec"]["template"]["metadata"]["labels"]
    (job,) = _kind("Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["db", "upgrade"]
    (runner,) = _kind("StatefulSet")
    container = runner["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["GPUARENA_SERVER"] == f"http://{service['metadata']['name']}"
    security = container["securityContext"]
    assert security["seccompProfile"]["type"] == "Unconfined" and security["procMount"] == "Unmasked"
    assert runner["spec"]["template"]["spec"]["hostUsers"] is False  # what procMount Unmasked needs


def test_kubernetes_api_probes_ask_health_on_the_served_port():
    (api,) = [d for d in _kind("Deployment") if d["metadata"]["name"] == "gpuarena-api"]
    container = api["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    args = container["args"]
    assert ports["http"] == int(args[args.index("--port") + 1])
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/api/health", "port": "http"}, probe


def test_kubernetes_commands_are_real_and_secrets_come_from_files():
    secrets = {doc["metadata"]["name"]: doc for doc in _kind("Secret")}
    workloads = [doc for _, doc in _manifests() if doc["kind"] in ("Deployment", "StatefulSet", "Job")]
    assert len(workloads) == 3
    for doc in workloads:
        where = f"{doc['kind']} {doc['metadata']['name']}"
        volumes = {v["name"]: v for v in doc["spec"]["template"]["spec"].get("volumes", [])}
        for container in _containers(doc):
            assert container["image"] in IMAGE_TARGETS, f"{where}: image {container['image']}"
            assert "command" not in container  # the image's entry point reads the secret files
            assert_real_cli(container["args"])
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            assert not any("valueFrom" in e for e in container.get("env", [])), f"{where}: secrets as files"
            assert_known_variables(env, where)
            mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
            for name, value in env.items():
                if not name.endswith("_FILE"):
                    continue
                folder, key = value.rsplit("/", 1)
                volume = volumes[mounts[folder]]
                secret = secrets[volume["secret"]["secretName"]]
                assert key in secret["stringData"], f"{where}: {name}: no key {key} in {secret['metadata']['name']}"
    assert not any("gpa_" in v and "CHANGE-ME" not in v for d in secrets.values() for v in d["stringData"].values())


# Slurm


def test_slurm_runs_a_real_runner_command_with_its_token_from_a_file():
    text = SBATCH.read_text()
    assert re.search(r"^#SBATCH --gres=gpu:\d+$", text, re.MULTILINE)
    assert re.search(r"^#SBATCH --signal=B:TERM@\d+$", text, re.MULTILINE)  # SIGTERM before the end
    runs = re.findall(r"^\s*cmd=\((.*?)\)$", text, re.MULTILINE | re.DOTALL)
    assert len(runs) == 2, "runner.sbatch runs `gpuarena runner` from a venv and from an image"
    for run in runs:
        argv = shlex.split(run.replace("\\\n", " "))
        assert_real_cli(argv[argv.index("gpuarena") + 1 :])
    assert "export GPUARENA_TOKEN_FILE=" in text and "--token " not in text
    assert_known_variables(dict.fromkeys(re.findall(r"\b(GPUARENA_[A-Z_]+)=", text)), "runner.sbatch")


# the checks themselves


@pytest.mark.parametrize(
    "argv",
    [["serve", "--no-such-option"], ["db", "downgrade"], ["db"], ["runner", "--token", "x"], ["users", "add", "gpa_x"]],
)
def test_the_cli_check_refuses_what_gpuarena_would(argv):
    with pytest.raises(AssertionError):
        assert_real_cli(argv)


def test_the_variable_check_refuses_unknown_and_token_variables():
    assert_known_variables({"GPUARENA_SERVER": "x", "GPUARENA_TOKEN_FILE": "/f", "PATH": "/bin"}, "ok")
    for bad in ("GPUARENA_NO_SUCH_SETTING", "GPUARENA_TOKEN"):
        with pytest.raises(AssertionError):
            assert_known_variables({bad: "x"}, "bad")
