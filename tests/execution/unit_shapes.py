"""The unit shapes operators write, as a catalogue for the end-to-end matrix
(`test_unit_shapes.py`): each installs its files (unit, drop-ins, environment files, wrapper
scripts) on a simulated GPU host under real systemd and says what a fix must change — or what
a refusal must name.

Written after public deployments of vLLM, SGLang, TGI and llama.cpp's server (unit files and
launch lines in public repositories and how-tos), with the stand-in engines of `advisor.sim`
in place of the real ones: they are launched the same way, print the engines' own lines and
record the argv they really receive.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from advisor.execution.dropins import quote
from advisor.sim.boxunits import GPUD_UNIT, command_line
from advisor.sim.gpuhost import GpuHost
from advisor.sim.standin import Standins, write_container_standins, write_standins

SIM = {
    "ADVISOR_SIM_VOCAB_SIZE": "200064",
    "ADVISOR_SIM_WEIGHTS_GIB": "230",
    "ADVISOR_SIM_SPEED": "16",
}
MODEL = "MiniMaxAI/MiniMax-M2.5"
# The seed deployment's flags, the failing value apart.
SEED = [
    "--trust-remote-code",
    "--max-model-len",
    "131072",
    "--tensor-parallel-size",
    "4",
    "--gpu-memory-utilization",
    "0.9",
    "--enable-expert-parallel",
]


@dataclass(frozen=True)
class Shape:
    """One way of writing a unit. `flag`/`fixed`: what the engine must receive after the fix
    (None: advisor refuses); `names`: what a refusal must name (file, setting)."""

    name: str
    unit: str
    label: str
    flag: str
    fixed: str | None
    install: Callable[[GpuHost, Path], None]
    names: tuple[str, ...] = ()
    engine: str = "vllm"
    restart_sec: str = "2s"


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def unit_text(
    description: str,
    exec_start: str,
    *,
    env: Mapping[str, str] = {},
    env_files: Sequence[str] = (),
    restart_sec: str = "2s",
    service: Sequence[str] = (),
) -> str:
    lines = [
        "[Unit]",
        f"Description={description}",
        f"After={GPUD_UNIT}",
        "",
        "[Service]",
        *[f"Environment={quote(f'{k}={v}', always=True)}" for k, v in env.items()],
        *[f"EnvironmentFile={p}" for p in env_files],
        f"ExecStart={exec_start}",
        "Restart=on-failure",
        f"RestartSec={restart_sec}",
        "TimeoutStopSec=5s",
        *service,
        "",
    ]
    return "\n".join(lines)


def vllm_env(host: GpuHost, **extra: str) -> dict[str, str]:
    return {**host.sim_environment(), **SIM, **extra}


@dataclass
class Files:
    """What a shape writes besides the unit, under the test's folder."""

    folder: Path
    written: dict[str, str] = field(default_factory=dict)

    def write(self, name: str, text: str) -> str:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.written[str(path)] = text
        return str(path)


def _literal(host: GpuHost, folder: Path) -> None:
    args = [str(host.script), "serve", "${MODEL}", *SEED, "--max-num-seqs", "1024"]
    host.box.install(
        "vllm.service",
        unit_text("vLLM", command_line(args), env=vllm_env(host, MODEL=MODEL)),
    )


def _taskset(host: GpuHost, folder: Path) -> None:
    args = ["/usr/bin/taskset", "-c", "0", str(host.script), "serve", "${MODEL}", *SEED]
    args += ["--max-num-seqs", "1024"]
    host.box.install(
        "vllm.service",
        unit_text("vLLM pinned", command_line(args), env=vllm_env(host, MODEL=MODEL)),
    )


def _venv(host: GpuHost, folder: Path) -> Path:
    """A virtual environment whose `activate` puts the stand-in `vllm` on PATH."""
    from advisor.sim.vllm_cli import write_vllm_script

    bin_dir = folder / "venv" / "bin"
    write_vllm_script(bin_dir)
    (bin_dir / "activate").write_text(
        f'VIRTUAL_ENV="{folder / "venv"}"\nexport VIRTUAL_ENV\nPATH="$VIRTUAL_ENV/bin:$PATH"\n'
        "export PATH\n"
    )
    return bin_dir


def _bash_source(host: GpuHost, folder: Path) -> None:
    bin_dir = _venv(host, folder)
    script = (
        f"source {bin_dir}/activate && vllm serve ${{MODEL}} {' '.join(SEED)} --max-num-seqs 1024"
    )
    exec_start = f"/bin/bash -c '{script}'"
    host.box.install(
        "vllm.service", unit_text("vLLM in bash", exec_start, env=vllm_env(host, MODEL=MODEL))
    )


def _sh_double_quotes(host: GpuHost, folder: Path) -> None:
    bin_dir = _venv(host, folder)
    script = f'exec {bin_dir}/vllm serve \\"$$MODEL\\" {" ".join(SEED)} --max-num-seqs=1024'
    host.box.install(
        "vllm.service",
        unit_text("vLLM in sh", f'/bin/sh -c "{script}"', env=vllm_env(host, MODEL=MODEL)),
    )


def _wrapper(folder: Path, host: GpuHost, body: str) -> Path:
    return executable(
        folder / "bin" / "start-vllm.sh",
        "#!/bin/bash\n# Start vLLM for this node (ops/runbooks/vllm.md)\nset -euo pipefail\n"
        + body,
    )


def _wrapper_forwards(host: GpuHost, folder: Path) -> None:
    script = _wrapper(
        folder,
        host,
        f'cd /\nexec {host.script} serve "$MODEL" \\\n    {" ".join(SEED)} \\\n    "$@"\n',
    )
    exec_start = command_line([str(script), "--max-num-seqs", "1024"])
    host.box.install(
        "vllm.service", unit_text("vLLM wrapper", exec_start, env=vllm_env(host, MODEL=MODEL))
    )


def _wrapper_literal(host: GpuHost, folder: Path) -> None:
    script = _wrapper(
        folder,
        host,
        f'exec {host.script} serve "$MODEL" {" ".join(SEED)} \\\n    --max-num-seqs 1024\n',
    )
    host.box.install(
        "vllm.service",
        unit_text("vLLM wrapper", command_line([str(script)]), env=vllm_env(host, MODEL=MODEL)),
    )


def _wrapper_closed(host: GpuHost, folder: Path) -> None:
    """A wrapper that starts the engine with its own flags only: the failing value is the
    engine's default, and a flag on ExecStart would never reach it."""
    script = _wrapper(folder, host, f'exec {host.script} serve "$MODEL" {" ".join(SEED)}\n')
    host.box.install(
        "vllm.service",
        unit_text("vLLM wrapper", command_line([str(script)]), env=vllm_env(host, MODEL=MODEL)),
    )


def _wrapper_env_file(host: GpuHost, folder: Path) -> None:
    env = Files(folder).write("etc/vllm.env", f"MODEL={MODEL}\nMAX_NUM_SEQS=1024\n")
    script = _wrapper(
        folder,
        host,
        f'exec {host.script} serve "$MODEL" {" ".join(SEED)} --max-num-seqs "${{MAX_NUM_SEQS}}"\n',
    )
    host.box.install(
        "vllm.service",
        unit_text("vLLM wrapper", command_line([str(script)]), env=vllm_env(host), env_files=[env]),
    )


def _wrapper_sources(host: GpuHost, folder: Path) -> None:
    config = Files(folder).write("opt/vllm/config.sh", f"MODEL={MODEL}\nMAX_NUM_SEQS=1024\n")
    script = _wrapper(
        folder,
        host,
        f'. {config}\nexec {host.script} serve "$MODEL" {" ".join(SEED)} '
        '--max-num-seqs "$MAX_NUM_SEQS"\n',
    )
    host.box.install(
        "vllm.service",
        unit_text("vLLM wrapper", command_line([str(script)]), env=vllm_env(host)),
    )


def _env_file_variable(host: GpuHost, folder: Path) -> None:
    env = Files(folder).write(
        "etc/default/vllm", f"# vLLM settings\nMODEL={MODEL}\nMAX_NUM_SEQS=1024\n"
    )
    args = [str(host.script), "serve", "${MODEL}", *SEED, "--max-num-seqs", "${MAX_NUM_SEQS}"]
    host.box.install(
        "vllm.service",
        unit_text(
            "vLLM",
            command_line(args),
            # Environment= says 512; the file, read after, says 1024: the file wins.
            env=vllm_env(host, MAX_NUM_SEQS="512"),
            env_files=[env],
        ),
    )


def _args_variable(host: GpuHost, folder: Path) -> None:
    env = Files(folder).write(
        "etc/vllm/vllm.env",
        f'MODEL={MODEL}\nVLLM_ARGS="{" ".join(SEED)} --max-num-seqs 1024"\n',
    )
    args = [str(host.script), "serve", "${MODEL}", "$VLLM_ARGS"]
    host.box.install(
        "vllm.service",
        unit_text(
            "vLLM", command_line(args), env=vllm_env(host), env_files=[env], restart_sec="100ms"
        ),
    )


def _override(host: GpuHost, folder: Path) -> None:
    args = [str(host.script), "serve", "Qwen/Qwen3-8B", "--max-num-seqs", "16"]
    host.box.install("vllm.service", unit_text("vLLM", command_line(args), env=vllm_env(host)))
    drop = host.units_dir / "vllm.service.d"
    drop.mkdir(exist_ok=True)
    real = [str(host.script), "serve", "${MODEL}", *SEED, "--max-num-seqs", "1024"]
    (drop / "override.conf").write_text(
        f"[Service]\nEnvironment=MODEL={MODEL}\nExecStart=\nExecStart={command_line(real)}\n"
    )
    host.box.systemctl("daemon-reload")


def _template(host: GpuHost, folder: Path) -> None:
    env = Files(folder).write(f"etc/vllm/{MODEL.split('/')[1]}.env", f"MODEL={MODEL}\n")
    args = [str(host.script), "serve", "${MODEL}", "--served-model-name", "%i", *SEED]
    args += ["--max-num-seqs", "1024"]
    text = unit_text(
        "vLLM %i",
        command_line(args).replace("%%i", "%i"),
        env=vllm_env(host),
        env_files=[env.replace(MODEL.split("/")[1], "%i")],
    )
    host.box.install("vllm@.service", text)


def _template_args(host: GpuHost, folder: Path) -> None:
    """A podman quadlet-like template: Type=notify (podman's conmon says ready once the
    container runs), the instance's settings in its own environment file, every flag in
    `$EXTRA_ARGS`."""
    tools = container_tools(host, folder)
    name = MODEL.split("/")[1]
    Files(folder).write(
        f"etc/vllm/{name}.env",
        f'MODEL={MODEL}\nEXTRA_ARGS="{" ".join(SEED)} --max-num-seqs 1024"\n',
    )
    exec_start = (
        f"{tools.podman} run --rm --replace --name vllm-%i --sdnotify=conmon "
        "--device nvidia.com/gpu=all --ipc=host -v /models:/models "
        "docker.io/vllm/vllm-openai:v0.10.1 --model ${MODEL} $EXTRA_ARGS"
    )
    text = unit_text(
        "vLLM %i (podman)",
        exec_start,
        env=vllm_env(host),
        env_files=[str(folder / "etc" / "vllm" / "%i.env")],
        service=["Type=notify", "NotifyAccess=all"],
    )
    host.box.install("vllm@.service", text)


@dataclass(frozen=True)
class Tools:
    docker: Path
    podman: Path
    standins: Standins


def container_tools(host: GpuHost, folder: Path) -> Tools:
    """The engines' stand-ins, and docker and podman whose images run them."""
    standins = write_standins(folder / "standins")
    images = {
        "vllm/vllm-openai": [str(host.script), "serve"],
        "ghcr.io/huggingface/text-generation-inference": [str(standins.tgi)],
    }
    docker, podman = write_container_standins(folder / "cbin", images, folder / "containers")
    return Tools(docker, podman, standins)


def _docker(host: GpuHost, folder: Path) -> None:
    tools = container_tools(host, folder)
    args = [
        str(tools.docker),
        "run",
        "--rm",
        "--name",
        "vllm",
        "--gpus",
        "all",
        "--shm-size",
        "16g",
        "-p",
        "8000:8000",
        "-e",
        "HF_TOKEN=${HF_TOKEN}",
        "vllm/vllm-openai:v0.8.5",
        "--model",
        MODEL,
        *SEED,
        "--max-num-seqs",
        "1024",
    ]
    host.box.install(
        "vllm.service",
        unit_text("vLLM (docker)", command_line(args), env=vllm_env(host, HF_TOKEN="hf_x")),
    )


def _module(host: GpuHost, folder: Path) -> None:
    tools = container_tools(host, folder)
    args = [python(), "-m", "vllm.entrypoints.openai.api_server", "--model", "${MODEL}", *SEED]
    args += ["--max-num-seqs", "1024"]
    env = vllm_env(host, MODEL=MODEL, PYTHONPATH=str(tools.standins.pythonpath))
    host.box.install("vllm.service", unit_text("vLLM API server", command_line(args), env=env))


def _sglang(host: GpuHost, folder: Path) -> None:
    tools = container_tools(host, folder)
    args = [python(), "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-32B"]
    args += ["--mem-fraction-static", "0.8", "--context-length", "32768", "--port", "30000"]
    env = {
        **host.sim_environment(gpus="0"),
        "ADVISOR_SIM_WEIGHTS_GIB": "80",
        "ADVISOR_SIM_SPEED": "16",
        "PYTHONPATH": str(tools.standins.pythonpath),
    }
    host.box.install("sglang.service", unit_text("SGLang", command_line(args), env=env))


def _tgi_env(host: GpuHost) -> dict[str, str]:
    return {
        **host.sim_environment(gpus="0"),
        "ADVISOR_SIM_WEIGHTS_GIB": "90",
        "ADVISOR_SIM_SPEED": "16",
        "ADVISOR_SIM_ARGV_ENV": "MAX_BATCH_PREFILL_TOKENS",
        "NO_COLOR": "1",
    }


def _tgi(host: GpuHost, folder: Path) -> None:
    tools = container_tools(host, folder)
    args = [str(tools.standins.tgi), "--model-id", "meta-llama/Llama-3.1-70B-Instruct"]
    args += ["--port", "8080", "--max-batch-prefill-tokens", "16384"]
    host.box.install("tgi.service", unit_text("TGI", command_line(args), env=_tgi_env(host)))


def _tgi_docker(host: GpuHost, folder: Path) -> None:
    tools = container_tools(host, folder)
    args = [str(tools.docker), "run", "--rm", "--name", "tgi", "--gpus", "all", "-p", "8080:80"]
    args += ["-v", "/data:/data", "-e", "MAX_BATCH_PREFILL_TOKENS=16384", "-e", "NO_COLOR=1"]
    args += ["ghcr.io/huggingface/text-generation-inference:3.0.1"]
    args += ["--model-id", "meta-llama/Llama-3.1-70B-Instruct"]
    host.box.install(
        "tgi.service", unit_text("TGI (docker)", command_line(args), env=_tgi_env(host))
    )


def _llama(host: GpuHost, folder: Path) -> None:
    tools = container_tools(host, folder)
    args = [str(tools.standins.llama_server), "-m", "/models/qwen3-8b-q4_k_m.gguf", "-ngl", "99"]
    args += ["-c", "1048576", "--port", "8081"]
    env = {**host.sim_environment(gpus="0"), "ADVISOR_SIM_WEIGHTS_GIB": "8"}
    host.box.install("llama.service", unit_text("llama.cpp server", command_line(args), env=env))


SHAPES: tuple[Shape, ...] = (
    Shape("literal", "vllm.service", "sampler_warmup_oom", "--max-num-seqs", "256", _literal),
    Shape("taskset", "vllm.service", "sampler_warmup_oom", "--max-num-seqs", "256", _taskset),
    Shape("bash-c", "vllm.service", "sampler_warmup_oom", "--max-num-seqs", "256", _bash_source),
    Shape("sh-c", "vllm.service", "sampler_warmup_oom", "--max-num-seqs", "256", _sh_double_quotes),
    Shape(
        "wrapper-forwards",
        "vllm.service",
        "sampler_warmup_oom",
        "--max-num-seqs",
        "256",
        _wrapper_forwards,
    ),
    Shape(
        "wrapper-literal",
        "vllm.service",
        "sampler_warmup_oom",
        "--max-num-seqs",
        None,
        _wrapper_literal,
        names=("start-vllm.sh line 5", "--max-num-seqs", "256"),
    ),
    Shape(
        "wrapper-no-forward",
        "vllm.service",
        "sampler_warmup_oom",
        "--max-num-seqs",
        None,
        _wrapper_closed,
        names=("start-vllm.sh line 4", '("$@")', "--max-num-seqs", "256"),
    ),
    Shape(
        "wrapper-env-file",
        "vllm.service",
        "sampler_warmup_oom",
        "--max-num-seqs",
        "256",
        _wrapper_env_file,
    ),
    Shape(
        "wrapper-sources",
        "vllm.service",
        "sampler_warmup_oom",
        "--max-num-seqs",
        None,
        _wrapper_sources,
        names=("config.sh", "MAX_NUM_SEQS", "--max-num-seqs", "256"),
    ),
    Shape(
        "env-file-variable",
        "vllm.service",
        "sampler_warmup_oom",
        "--max-num-seqs",
        "256",
        _env_file_variable,
    ),
    Shape(
        "args-variable",
        "vllm.service",
        "sampler_warmup_oom",
        "--max-num-seqs",
        "256",
        _args_variable,
        restart_sec="100ms",
    ),
    Shape(
        "override-conf", "vllm.service", "sampler_warmup_oom", "--max-num-seqs", "256", _override
    ),
    Shape(
        "template",
        f"vllm@{MODEL.split('/')[1]}.service",
        "sampler_warmup_oom",
        "--max-num-seqs",
        "256",
        _template,
    ),
    Shape(
        "podman-template-notify",
        f"vllm@{MODEL.split('/')[1]}.service",
        "sampler_warmup_oom",
        "--max-num-seqs",
        "256",
        _template_args,
    ),
    Shape("docker", "vllm.service", "sampler_warmup_oom", "--max-num-seqs", "256", _docker),
    Shape("python-m", "vllm.service", "sampler_warmup_oom", "--max-num-seqs", "256", _module),
    Shape(
        "sglang",
        "sglang.service",
        "kv_cache_oom",
        "--mem-fraction-static",
        "0.85",
        _sglang,
        engine="sglang",
    ),
    Shape(
        "tgi",
        "tgi.service",
        "kv_cache_oom",
        "--max-batch-prefill-tokens",
        "8192",
        _tgi,
        engine="tgi",
    ),
    Shape(
        "tgi-docker",
        "tgi.service",
        "kv_cache_oom",
        "MAX_BATCH_PREFILL_TOKENS",
        "8192",
        _tgi_docker,
        engine="tgi",
    ),
    Shape(
        "llama-server", "llama.service", "kv_cache_oom", "-c", "524288", _llama, engine="llamacpp"
    ),
)


def python() -> str:
    return os.path.realpath(sys.executable)


def _unset(host: GpuHost, folder: Path) -> None:
    """The value advisor overrides never reaches the engine: `UnsetEnvironment=` removes the
    variable after every environment file (advisor's included), and the wrapper's default
    applies — a shape the resolver does not model, which the effect check catches."""
    script = _wrapper(
        folder,
        host,
        f'exec {host.script} serve "$MODEL" {" ".join(SEED)} '
        '--max-num-seqs "${MAX_NUM_SEQS:-1024}"\n',
    )
    text = unit_text(
        "vLLM wrapper",
        command_line([str(script)]),
        env=vllm_env(host, MODEL=MODEL),
        service=["UnsetEnvironment=MAX_NUM_SEQS"],
    )
    host.box.install("vllm.service", text)


UNSET = Shape(
    "unset-environment", "vllm.service", "sampler_warmup_oom", "--max-num-seqs", None, _unset
)
