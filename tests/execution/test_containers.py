"""Reading `docker run` / `podman run` lines (advisor.execution.containers): the shapes people
write in unit files and quadlets, every way pflag accepts an option, random option orders
(Hypothesis), what is not sure said so, and the seam to the runtime checked on the argv it builds
and on fake /proc and cgroup trees (v2 and the hybrid layout)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.execution.containers import (
    IMAGE_REFERENCE,
    TABLES,
    ContainerRun,
    EnvOption,
    cgroup_pids,
    container_pids,
    descendants,
    image_engine,
    inspect_pid,
    parse_run,
    split_image,
    subcommand,
    valid_container,
)

KNOWN_IMAGES = {
    "vllm/vllm-openai": "vllm",
    "rocm/vllm": "vllm",
    "lmsysorg/sglang": "sglang",
    "huggingface/text-generation-inference": "tgi",
    "ggml-org/llama.cpp": "llama.cpp",
}


def parsed(line: str) -> ContainerRun:
    run = parse_run(shlex.split(line))
    assert run is not None, line
    return run


def check_indices(argv: Sequence[str], run: ContainerRun) -> None:
    """Every index points at the word it claims."""
    assert argv[run.run_index] == "run"
    assert argv[run.image_index] == run.image
    assert run.command_start == run.image_index + 1
    for env in run.env:
        text = env.name if env.value is None else f"{env.name}={env.value}"
        assert argv[env.index] == env.prefix + text


# ---------------------------------------------------------------- lines from unit files
REAL_WORLD = [
    # (line, image, the command after the image, name, rm, detached, env names)
    (
        "/usr/bin/docker run --rm --name vllm --gpus all -v /models:/models "
        "-e HF_TOKEN=${HF_TOKEN} -p 8000:8000 --ipc=host vllm/vllm-openai:v0.8.5 "
        "--model /models/qwen --max-num-seqs 1024",
        "vllm/vllm-openai:v0.8.5",
        ["--model", "/models/qwen", "--max-num-seqs", "1024"],
        "vllm",
        True,
        False,
        ["HF_TOKEN"],
    ),
    (
        "docker run --runtime nvidia --gpus '\"device=0,1\"' -v "
        "/root/.cache/huggingface:/root/.cache/huggingface --env HUGGING_FACE_HUB_TOKEN=hf_x "
        "-p 8000:8000 --ipc=host --shm-size 16g --ulimit memlock=-1 --ulimit stack=67108864 "
        "vllm/vllm-openai:latest --model mistralai/Mistral-7B-v0.1 --tensor-parallel-size 2",
        "vllm/vllm-openai:latest",
        ["--model", "mistralai/Mistral-7B-v0.1", "--tensor-parallel-size", "2"],
        None,
        False,
        False,
        ["HUGGING_FACE_HUB_TOKEN"],
    ),
    (
        "docker run --gpus all --shm-size 32g -p 30000:30000 -v /srv/hf:/root/.cache/huggingface "
        '--env "HF_TOKEN=secret" --ipc=host lmsysorg/sglang:v0.4.6-cu124 python3 -m '
        "sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 "
        "--port 30000",
        "lmsysorg/sglang:v0.4.6-cu124",
        [
            "python3",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--host",
            "0.0.0.0",
            "--port",
            "30000",
        ],
        None,
        False,
        False,
        ["HF_TOKEN"],
    ),
    (
        "/usr/bin/docker run --rm --name tgi --gpus all --shm-size 1g -p 8080:80 -v /data:/data "
        "ghcr.io/huggingface/text-generation-inference:3.0.1 --model-id "
        "meta-llama/Meta-Llama-3-8B-Instruct --max-batch-prefill-tokens 16384",
        "ghcr.io/huggingface/text-generation-inference:3.0.1",
        [
            "--model-id",
            "meta-llama/Meta-Llama-3-8B-Instruct",
            "--max-batch-prefill-tokens",
            "16384",
        ],
        "tgi",
        True,
        False,
        [],
    ),
    (
        "docker run --rm --name tgi --gpus all -e MODEL_ID=Qwen/Qwen2.5-7B-Instruct "
        "-e MAX_BATCH_PREFILL_TOKENS=16384 -e MAX_TOTAL_TOKENS=32768 -p 8080:80 "
        "ghcr.io/huggingface/text-generation-inference:3.0",
        "ghcr.io/huggingface/text-generation-inference:3.0",
        [],
        "tgi",
        True,
        False,
        ["MODEL_ID", "MAX_BATCH_PREFILL_TOKENS", "MAX_TOTAL_TOKENS"],
    ),
    (
        "docker run -v /srv/models:/models -p 8000:8000 ghcr.io/ggml-org/llama.cpp:server "
        "-m /models/7B/ggml-model-q4_0.gguf -c 32768 --host 0.0.0.0 --port 8000 -n 512",
        "ghcr.io/ggml-org/llama.cpp:server",
        [
            "-m",
            "/models/7B/ggml-model-q4_0.gguf",
            "-c",
            "32768",
            "--host",
            "0.0.0.0",
            "--port",
            "8000",
            "-n",
            "512",
        ],
        None,
        False,
        False,
        [],
    ),
    (
        "/usr/bin/docker run --rm --name llama --gpus all -v /srv/models:/models -p 8080:8080 "
        "ghcr.io/ggml-org/llama.cpp:server-cuda -m /models/x.gguf -c 32768 --n-gpu-layers 99",
        "ghcr.io/ggml-org/llama.cpp:server-cuda",
        ["-m", "/models/x.gguf", "-c", "32768", "--n-gpu-layers", "99"],
        "llama",
        True,
        False,
        [],
    ),
    (
        "/usr/bin/podman run --rm --replace --name vllm --device nvidia.com/gpu=all "
        "--security-opt=label=disable -v /models:/models:Z -p 8000:8000 "
        "docker.io/vllm/vllm-openai:v0.8.5 --model /models/qwen",
        "docker.io/vllm/vllm-openai:v0.8.5",
        ["--model", "/models/qwen"],
        "vllm",
        True,
        False,
        [],
    ),
    (  # what quadlet writes for a .container file
        "/usr/bin/podman run --name=systemd-vllm --cidfile=/run/vllm.cid --replace --rm "
        "--cgroups=split --sdnotify=conmon -d --device nvidia.com/gpu=all -v /srv/models:/models:z "
        "--publish 8000:8000 --env HF_HOME=/models docker.io/vllm/vllm-openai:latest "
        "--model /models/llama --tensor-parallel-size 2",
        "docker.io/vllm/vllm-openai:latest",
        ["--model", "/models/llama", "--tensor-parallel-size", "2"],
        "systemd-vllm",
        True,
        True,
        ["HF_HOME"],
    ),
    (
        "podman --log-level=info --cgroup-manager systemd run --pull=newer -it --rm "
        "--name sg --hooks-dir /usr/share/containers/oci/hooks.d lmsysorg/sglang:latest "
        "python3 -m sglang.launch_server --model-path /m",
        "lmsysorg/sglang:latest",
        ["python3", "-m", "sglang.launch_server", "--model-path", "/m"],
        "sg",
        True,
        False,
        [],
    ),
    (
        "/usr/bin/docker -H unix:///run/docker.sock --log-level warn container run --init "
        "--name=vllm --restart no --network host --pid host -u 1000:1000 --cpus 8 -m 64g "
        "--memory-swappiness -1 --oom-score-adj -500 vllm/vllm-openai:v0.6.6 --model /m",
        "vllm/vllm-openai:v0.6.6",
        ["--model", "/m"],
        "vllm",
        False,
        False,
        [],
    ),
    (
        "nerdctl run --gpus all -p 8000:8000 --name vllm vllm/vllm-openai:latest --model /m",
        "vllm/vllm-openai:latest",
        ["--model", "/m"],
        "vllm",
        False,
        False,
        [],
    ),
    (
        "docker run --entrypoint python3 --rm vllm/vllm-openai:v0.6.0 -m "
        "vllm.entrypoints.openai.api_server --model /m",
        "vllm/vllm-openai:v0.6.0",
        ["-m", "vllm.entrypoints.openai.api_server", "--model", "/m"],
        None,
        True,
        False,
        [],
    ),
    (
        "docker run -itd --rm -eCUDA_VISIBLE_DEVICES=0 -e=VLLM_LOGGING_LEVEL=DEBUG "
        "--env=HF_HUB_OFFLINE=1 -e HF_TOKEN --env-file /etc/vllm.env -- "
        "vllm/vllm-openai@sha256:" + "ab" * 32 + " --model /m",
        "vllm/vllm-openai@sha256:" + "ab" * 32,
        ["--model", "/m"],
        None,
        True,
        True,
        ["CUDA_VISIBLE_DEVICES", "VLLM_LOGGING_LEVEL", "HF_HUB_OFFLINE", "HF_TOKEN"],
    ),
]


@pytest.mark.parametrize(("line", "image", "command", "name", "rm", "detached", "env"), REAL_WORLD)
def test_real_world_lines(
    line: str,
    image: str,
    command: list[str],
    name: str | None,
    rm: bool,
    detached: bool,
    env: list[str],
) -> None:
    argv = shlex.split(line)
    run = parse_run(argv)
    assert run is not None
    assert run.certain, run.unknown
    assert run.image == image
    assert argv[run.command_start :] == command
    assert (run.name, run.rm, run.detached) == (name, rm, detached)
    assert [e.name for e in run.env] == env
    assert run.unknown == ()
    check_indices(argv, run)
    assert image_engine(run.image, KNOWN_IMAGES) is not None


def test_environment_options_in_every_form() -> None:
    line = REAL_WORLD[-1][0]
    argv = shlex.split(line)
    run = parsed(line)
    assert run.env == (
        EnvOption(argv.index("-eCUDA_VISIBLE_DEVICES=0"), "CUDA_VISIBLE_DEVICES", "0", "-e"),
        EnvOption(argv.index("-e=VLLM_LOGGING_LEVEL=DEBUG"), "VLLM_LOGGING_LEVEL", "DEBUG", "-e="),
        EnvOption(argv.index("--env=HF_HUB_OFFLINE=1"), "HF_HUB_OFFLINE", "1", "--env="),
        EnvOption(argv.index("HF_TOKEN"), "HF_TOKEN", None, ""),
    )
    assert run.env_files == ("/etc/vllm.env",)
    tgi = parsed(REAL_WORLD[4][0])
    assert {e.name: e.value for e in tgi.env}["MAX_BATCH_PREFILL_TOKENS"] == "16384"


def test_the_fields_a_caller_edits_by() -> None:
    quadlet = parsed(REAL_WORLD[8][0])
    assert (quadlet.runtime, quadlet.cidfile, quadlet.replace) == ("podman", "/run/vllm.cid", True)
    entry = parsed(REAL_WORLD[12][0])
    assert entry.entrypoint == "python3"
    assert parsed("docker run --rm vllm/vllm-openai").command_start == 4  # == len(argv)
    assert parsed("podman run --rmi x/y").rm  # --rmi implies --rm
    assert parsed("docker container run x/y").run_index == 2


@pytest.mark.parametrize(
    ("line", "rm", "detached"),
    [
        ("docker run --rm=false -d=true x/y", False, True),
        ("docker run --rm=true --detach=False x/y", True, False),
        ("docker run --rm --rm=0 x/y", False, False),
        ("docker run -d=1 --rm=T x/y", True, True),
        ("docker run -it --rm x/y", True, False),
    ],
)
def test_switches_given_a_boolean(line: str, rm: bool, detached: bool) -> None:
    run = parsed(line)
    assert (run.rm, run.detached, run.certain) == (rm, detached, True)


def test_values_that_look_like_images_or_options_are_values() -> None:
    run = parsed(
        "docker run --network host --pid host --restart always --user nobody "
        "--log-driver journald --memory-swappiness -1 --name vllm x/y:1 --model m"
    )
    assert (run.image, run.name, run.certain) == ("x/y:1", "vllm", True)
    assert parsed("docker run -e -x x/y").env == (EnvOption(3, "-x", None),)


@pytest.mark.parametrize(
    "line",
    [
        "docker ps",
        "docker exec vllm nvidia-smi",
        "docker pull vllm/vllm-openai",
        "docker run",
        "docker run --rm --name vllm",
        "docker container ls",
        "docker --future-global x run vllm/vllm-openai",  # x taken for the subcommand: fail safe
        "docker compose up",
        "docker-compose up",
        "/usr/bin/python3 -m vllm.entrypoints.openai.api_server --model x",
        "/opt/sim/vllm serve x",
        "runc run x",
        "",
    ],
)
def test_what_is_no_run(line: str) -> None:
    assert parse_run(shlex.split(line)) is None


@pytest.mark.parametrize(
    ("line", "image", "unknown"),
    [
        ("docker run --fancy-new-flag vllm/vllm-openai --model x", "vllm/vllm-openai", 1),
        ("docker run --fancy-new=3 vllm/vllm-openai --model x", "vllm/vllm-openai", 1),
        ("docker run --fancy-new 3 vllm/vllm-openai --model x", "3", 1),
        ("docker run --fancy-new /etc/x.conf vllm/vllm-openai", "vllm/vllm-openai", 1),
        ("docker run -X vllm/vllm-openai --model x", "vllm/vllm-openai", 1),
        ("docker run -itX vllm/vllm-openai", "vllm/vllm-openai", 1),
        ("docker run --rm=maybe vllm/vllm-openai", "vllm/vllm-openai", 0),
        ("docker run -d=sure vllm/vllm-openai", "vllm/vllm-openai", 0),
        ("docker run --rm ${IMAGE} --model x", "${IMAGE}", 0),
        ("docker run --rm $IMAGE_AND_ARGS", "$IMAGE_AND_ARGS", 0),
        ("docker --future-global run vllm/vllm-openai", "vllm/vllm-openai", 0),
        ("docker --future-global=x run vllm/vllm-openai", "vllm/vllm-openai", 0),
        ("podman --future-global /x run vllm/vllm-openai", "vllm/vllm-openai", 0),
        ("docker run --replace vllm/vllm-openai", "vllm/vllm-openai", 1),  # podman's, not docker's
        ("podman run --use-api-socket vllm/vllm-openai", "vllm/vllm-openai", 1),  # the reverse
    ],
)
def test_what_is_not_sure_says_so(line: str, image: str, unknown: int) -> None:
    run = parsed(line)
    assert run.image == image
    assert not run.certain
    assert len(run.unknown) == unknown


def test_the_option_tables_hold_whole_option_names() -> None:
    for runtime, tables in TABLES.items():
        for table in tables:
            names = table.values | table.bools
            assert all(re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", n) for n in names), runtime
            assert not table.values & table.bools
            assert set(table.shorts.values()) <= names
    docker_run, podman_run = TABLES["docker"][1], TABLES["podman"][1]
    assert {"env", "env-file", "name", "gpus", "device", "entrypoint", "cidfile"} <= (
        docker_run.values & podman_run.values
    )
    assert {"replace", "rmi", "http-proxy"} <= podman_run.bools - docker_run.bools
    assert {"root", "log-level", "runtime", "cgroup-manager"} <= podman_run.values
    assert "use-api-socket" in docker_run.bools
    assert subcommand(["docker", "--tlsverify", "-D", "--config", "/c", "run"]) == (
        "docker",
        5,
        True,
    )


# ------------------------------------------------------------------ random option orders
VALUED = [("--name", "n1"), ("-v", "/m:/m"), ("--shm-size", "16g"), ("-p", "8000:8000"),
          ("--ipc", "host"), ("--gpus", "all"), ("--restart", "no"), ("-u", "1000"),
          ("--network", "host"), ("--ulimit", "memlock=-1"), ("--memory-swappiness", "-1"),
          ("-w", "/srv"), ("--label", "a=b"), ("--log-opt", "tag=x")]  # fmt: skip
SWITCHES = ["--rm", "-d", "-i", "-t", "--init", "--privileged", "--read-only"]


@st.composite
def run_lines(draw: st.DrawFn) -> tuple[list[str], dict[str, Any]]:
    """A `docker run` with options in random order and forms; what it should read as."""
    chosen = draw(st.lists(st.sampled_from(VALUED), unique=True, max_size=len(VALUED)))
    switches = draw(st.lists(st.sampled_from(SWITCHES), unique=True))
    env = draw(st.lists(st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True), max_size=4))
    words: list[list[str]] = []
    for flag, value in chosen:
        form = draw(st.sampled_from(["apart", "equals", "attached"]))
        if form == "equals" or (form == "attached" and flag.startswith("--")):
            words.append([f"{flag}={value}"])
        elif form == "attached":
            words.append([flag + value])
        else:
            words.append([flag, value])
    shorts = [s[1] for s in switches if len(s) == 2]
    combine: bool = draw(st.booleans())
    if shorts and combine:  # combined: -dit
        switches = [s for s in switches if len(s) != 2] + ["-" + "".join(shorts)]
    words += [[s] for s in switches]
    words += [["-e", f"{name}={i}"] for i, name in enumerate(env)]
    order = draw(st.permutations(range(len(words))))
    image = draw(st.sampled_from(["vllm/vllm-openai:v0.8.5", "ghcr.io/ggml-org/llama.cpp:server"]))
    tail = draw(st.lists(st.sampled_from(["--model", "/m", "-c", "8", "--rm", "-e", "X=1"])))
    argv = ["docker", "run", *(w for i in order for w in words[i]), image, *tail]
    name = next((v for f, v in chosen if f == "--name"), None)
    in_order = [env[int(words[i][1].split("=")[1])] for i in order if words[i][0] == "-e"]
    detached = any(s == "-d" or (not s.startswith("--") and "d" in s) for s in switches)
    expect: dict[str, Any] = {"image": image, "tail": tail, "name": name, "env": in_order}
    expect |= {"rm": "--rm" in switches, "detached": detached}
    return argv, expect


@settings(max_examples=300, deadline=None)
@given(case=run_lines())
def test_random_orders_and_forms_read_the_same(case: tuple[list[str], dict[str, Any]]) -> None:
    argv, expect = case
    run = parse_run(argv)
    assert run is not None and run.certain
    assert run.image == expect["image"]
    assert argv[run.command_start :] == expect["tail"]
    assert run.name == expect["name"]
    assert [e.name for e in run.env] == expect["env"]
    assert (run.rm, run.detached) == (expect["rm"], expect["detached"])
    check_indices(argv, run)


@settings(max_examples=200, deadline=None)
@given(case=run_lines(), flag=st.from_regex(r"--zz-[a-z]{1,8}(=[a-z0-9]{1,4})?", fullmatch=True),
       at=st.integers(min_value=2, max_value=40))  # fmt: skip
def test_an_unknown_option_is_never_certain(
    case: tuple[list[str], dict[str, Any]], flag: str, at: int
) -> None:
    argv, expect = case
    image_at = argv.index(expect["image"])
    argv.insert(min(at, image_at), flag)  # among the options (never inside one's value: after a
    if argv[argv.index(flag) - 1] in {f for f, _ in VALUED} | {"-e"}:  # flag, it is its value)
        return
    run = parse_run(argv)
    assert run is not None and not run.certain and run.unknown


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.text(max_size=12), max_size=12), runtime=st.sampled_from(list(TABLES)))
def test_any_words_read_without_an_error(words: list[str], runtime: str) -> None:
    run = parse_run([runtime, "run", *words])
    if run is not None:
        assert 1 < run.image_index < len(words) + 2
        check_indices([runtime, "run", *words], run)


# -------------------------------------------------------------------------------- images
@pytest.mark.parametrize(
    ("image", "engine"),
    [
        ("docker.io/vllm/vllm-openai:latest", "vllm"),
        ("vllm/vllm-openai@sha256:" + "0f" * 32, "vllm"),
        ("vllm/vllm-openai:v0.8.5@sha256:" + "0f" * 32, "vllm"),
        ("index.docker.io/vllm/vllm-openai", "vllm"),
        ("ghcr.io/huggingface/text-generation-inference:3.0.1", "tgi"),
        ("lmsysorg/sglang:v0.4.6-cu124", "sglang"),
        ("ghcr.io/ggml-org/llama.cpp:server-cuda", "llama.cpp"),
        ("registry.corp:5000/mirror/vllm/vllm-openai:v0.8.5", "vllm"),
        ("harbor.corp/dockerhub-proxy/lmsysorg/sglang:latest", "sglang"),
        ("VLLM/VLLM-OPENAI:latest", "vllm"),
        ("localhost/my-vllm:dev", None),
        ("vllm-openai", None),
        ("other/vllm-openai", None),
        ("vllm/vllm-openai-fork", None),
        ("nginx", None),
    ],
)
def test_image_engine(image: str, engine: str | None) -> None:
    assert image_engine(image, KNOWN_IMAGES) == engine


def test_image_engine_keys_may_name_a_host_a_tag_or_a_local_image() -> None:
    images = {
        "localhost/my-vllm": "vllm",
        "ghcr.io/ggml-org/llama.cpp": "llama.cpp",
        "ghcr.io/ggml-org/llama.cpp:full": "llama.cpp-tools",
        "docker.io/library/ubuntu": "none",
    }
    assert image_engine("localhost/my-vllm:dev", images) == "vllm"
    assert image_engine("my-vllm:dev", images) is None  # the key names a host
    assert image_engine("ghcr.io/ggml-org/llama.cpp:server", images) == "llama.cpp"
    assert image_engine("ghcr.io/ggml-org/llama.cpp:full", images) == "llama.cpp-tools"
    assert image_engine("quay.io/ggml-org/llama.cpp:server", images) is None
    assert image_engine("ubuntu:24.04", images) == "none"  # docker hub's library/
    assert split_image("docker.io/library/ubuntu:24.04") == ("docker.io", "ubuntu", "24.04")
    assert split_image("localhost:5000/a/b@sha256:" + "1" * 64) == ("localhost:5000", "a/b", None)


def test_image_reference_grammar() -> None:
    good = ["vllm/vllm-openai:v0.8.5", "a", "localhost:5000/x/y_z:1.0-rc", "ghcr.io/a/b.c:x"]
    bad = ["${IMAGE}", "$IMAGE", "Vllm/X", "-x", "/abs/path", "a//b", "x:", ""]
    assert all(IMAGE_REFERENCE.fullmatch(word) for word in good)
    assert not any(IMAGE_REFERENCE.fullmatch(word) for word in bad)


# ------------------------------------------------------------------------- the runtime
class FakeRunner:
    def __init__(
        self, stdout: str = "4242\n", returncode: int = 0, raises: Exception | None = None
    ):
        self.calls: list[tuple[list[str], dict[str, Any]]] = []
        self.stdout, self.returncode, self.raises = stdout, returncode, raises

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append((argv, kwargs))
        if self.raises is not None:
            raise self.raises
        return subprocess.CompletedProcess(argv, self.returncode, self.stdout, "")


def test_inspect_pid_builds_an_argv_never_a_shell() -> None:
    runner = FakeRunner()
    assert inspect_pid("podman", "vllm", runner=runner, timeout_s=3) == 4242
    [(argv, kwargs)] = runner.calls
    assert argv == [
        "podman",
        "inspect",
        "--type",
        "container",
        "--format",
        "{{.State.Pid}}",
        "vllm",
    ]
    assert kwargs["timeout"] == 3 and not kwargs.get("shell")
    assert inspect_pid("/usr/bin/docker", "a" * 64, runner=runner) == 4242
    assert runner.calls[-1][0][0] == "/usr/bin/docker"


DOUBTFUL = ["", "-f", "--format={{.}}", "a b", "$(reboot)", "x;id", "../x", "/vllm", "_x", "é"]


@pytest.mark.parametrize("ref", [*DOUBTFUL, "a" * 254])
def test_a_doubtful_container_reference_is_refused_unasked(ref: str) -> None:
    runner = FakeRunner()
    assert not valid_container(ref)
    assert inspect_pid("docker", ref, runner=runner) is None
    assert container_pids("docker", ref, runner=runner) == set()
    assert runner.calls == []


@pytest.mark.parametrize("runtime", ["", "-H", "docker run", "docker;id", "$(x)"])
def test_a_doubtful_runtime_is_refused_unasked(runtime: str) -> None:
    runner = FakeRunner()
    assert inspect_pid(runtime, "vllm", runner=runner) is None
    assert runner.calls == []


@pytest.mark.parametrize(
    "runner",
    [
        FakeRunner(stdout="0\n"),  # not running
        FakeRunner(stdout="\n"),
        FakeRunner(stdout="<no value>\n"),
        FakeRunner(stdout="-1\n"),
        FakeRunner(stdout="Error: No such container: vllm\n", returncode=1),
        FakeRunner(raises=subprocess.TimeoutExpired(["docker"], 10)),
        FakeRunner(raises=FileNotFoundError("docker")),
        FakeRunner(raises=PermissionError("docker")),
    ],
)
def test_inspect_pid_failures_are_none(runner: FakeRunner) -> None:
    assert inspect_pid("docker", "vllm", runner=runner) is None
    assert container_pids("docker", "vllm", runner=runner) == set()


def fake_proc(root: Path, parents: dict[int, int], cgroups: dict[int, str]) -> Path:
    proc = root / "proc"
    for pid, ppid in parents.items():
        (proc / str(pid)).mkdir(parents=True)
        comm = "python3 (x) y" if pid % 2 else "vllm"
        (proc / str(pid) / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} 0 0 -1\n")
        (proc / str(pid) / "cgroup").write_text(cgroups.get(pid, "0::/system.slice/x.service\n"))
    return proc


def fake_cgroups(root: Path, members: dict[str, list[int]]) -> Path:
    for path, pids in members.items():
        folder = root / "cgroup" / path
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cgroup.procs").write_text("".join(f"{p}\n" for p in pids))
    return root / "cgroup"


HYBRID = "12:pids:/system.slice/docker-c.scope\n1:name=systemd:/system.slice/docker-c.scope\n"


V2 = "0::/system.slice/docker-c.scope\n"


@pytest.mark.parametrize(("layout", "prefix"), [(V2, ""), (HYBRID + V2, "unified/")])
def test_container_pids_lists_the_cgroup_v2_or_hybrid(
    tmp_path: Path, layout: str, prefix: str
) -> None:
    parents = {1: 0, 10: 1, 20: 1, 21: 20, 22: 21, 30: 1}
    proc = fake_proc(tmp_path, parents, {20: layout, 21: layout, 22: layout})
    cgroups = fake_cgroups(tmp_path, {
        "system.slice/docker.service": [10],
        f"{prefix}system.slice/docker-c.scope": [20, 21],
        f"{prefix}system.slice/docker-c.scope/inner": [22],  # a cgroup below: its too
        f"{prefix}system.slice/vllm.service": [30],
    })  # fmt: skip
    pids = container_pids("docker", "c", runner=FakeRunner("20\n"), proc=proc, cgroup_root=cgroups)
    assert pids == {20, 21, 22}
    assert cgroup_pids(20, proc=proc, cgroup_root=cgroups) == {20, 21, 22}


def test_without_a_readable_cgroup_the_descendants(tmp_path: Path) -> None:
    parents = {1: 0, 20: 1, 21: 20, 22: 21, 23: 20, 30: 1, 31: 30}
    proc = fake_proc(tmp_path, parents, {20: "0::/\n"})  # the root cgroup: never listed whole
    cgroups = fake_cgroups(tmp_path, {"": [1, 20, 21, 22, 23, 30, 31]})
    assert cgroup_pids(20, proc=proc, cgroup_root=cgroups) == set()
    pids = container_pids("docker", "c", runner=FakeRunner("20\n"), proc=proc, cgroup_root=cgroups)
    assert pids == {20, 21, 22, 23}
    # a cgroup that does not list the PID (another namespace's view): descendants too
    proc2 = fake_proc(tmp_path / "2", parents, {20: "0::/system.slice/docker-c.scope\n"})
    cg2 = fake_cgroups(tmp_path / "2", {"system.slice/docker-c.scope": [999]})
    runner = FakeRunner("20\n")
    assert container_pids("docker", "c", runner=runner, proc=proc2, cgroup_root=cg2) == {
        20, 21, 22, 23
    }  # fmt: skip
    assert descendants(77, proc=proc) == set()


def test_descendants_on_the_real_proc() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert {os.getpid(), child.pid} <= descendants(os.getpid())
        assert child.pid in cgroup_pids(child.pid) or not cgroup_pids(child.pid)
    finally:
        child.kill()
        child.wait()
