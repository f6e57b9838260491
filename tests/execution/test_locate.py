"""Where a flag's value lives (`advisor.execution.locate`), on the command lines operators
write: the value in force, where it is set, and the change — a word of ExecStart or of its
shell string, a variable to override, a flag to add — or a refusal that names the place.
(The end-to-end matrix, `test_unit_shapes.py`, checks the same shapes under real systemd.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.execution.envfile import split_words
from advisor.execution.locate import Refusal, resolve
from advisor.execution.state import ExecCommand, UnitSnapshot


def unit(
    *argv: str,
    env: tuple[str, ...] = (),
    files: tuple[str, ...] = (),
    path: str | None = None,
) -> UnitSnapshot:
    command = ExecCommand(path or argv[0], tuple(argv))
    return UnitSnapshot(
        "vllm.service",
        exec_start=(command,),
        environment=env,
        environment_files=tuple((f, False) for f in files),
    )


VLLM = ("/opt/venv/bin/vllm", "serve", "m")


def test_a_literal_word_is_changed_in_place() -> None:
    found = resolve(
        unit(*VLLM, "--max-num-seqs", "1024", "--port", "8000"), "--max-num-seqs", "256"
    )
    assert found.current == "1024" and "ExecStart=" in found.where
    assert found.argv == (*VLLM, "--max-num-seqs", "256", "--port", "8000")
    assert not found.variables and found.refused is None


def test_an_alias_and_the_equals_form_are_the_same_flag() -> None:
    found = resolve(unit(*VLLM, "--max_num_seqs=1024"), "--max-num-seqs", "256")
    assert found.current == "1024"
    assert found.argv == (*VLLM, "--max_num_seqs=256")
    llama = unit("/usr/bin/llama-server", "-m", "x.gguf", "-c", "131072")
    assert resolve(llama, "--ctx-size", "65536").argv == (
        "/usr/bin/llama-server",
        "-m",
        "x.gguf",
        "-c",
        "65536",
    )


def test_every_occurrence_gets_the_value_never_a_duplicate() -> None:
    found = resolve(
        unit(*VLLM, "--max-num-seqs", "8", "--max-num-seqs", "1024"), "--max-num-seqs", "256"
    )
    assert found.current == "1024"  # the last one wins, in the engine's parser
    assert found.argv == (*VLLM, "--max-num-seqs", "256", "--max-num-seqs", "256")


def test_a_flag_set_nowhere_is_added_where_the_engine_arguments_end() -> None:
    found = resolve(unit(*VLLM, "--port", "8000"), "--max-num-seqs", "256")
    assert found.current is None
    assert found.argv == (*VLLM, "--port", "8000", "--max-num-seqs", "256")


def test_a_variable_from_an_environment_file_is_overridden_not_the_command(tmp_path: Path) -> None:
    env = tmp_path / "vllm.env"
    env.write_text("MAX_NUM_SEQS=1024\n")
    found = resolve(
        unit(
            *VLLM, "--max-num-seqs", "${MAX_NUM_SEQS}", env=("MAX_NUM_SEQS=512",), files=(str(env),)
        ),
        "--max-num-seqs",
        "256",
    )
    assert found.current == "1024" and str(env) in found.where  # the file beats Environment=
    assert found.argv is None and found.variables == {"MAX_NUM_SEQS": "256"}


def test_a_split_variable_holding_the_flags_is_overridden_with_one_value_changed(
    tmp_path: Path,
) -> None:
    env = tmp_path / "vllm.env"
    args = "--tensor-parallel-size 4 --served-model-name 'my model' --max-num-seqs 1024"
    env.write_text(f'VLLM_ARGS="{args}"\n')
    found = resolve(unit(*VLLM, "$VLLM_ARGS", files=(str(env),)), "--max-num-seqs", "256")
    assert found.current == "1024"
    words = split_words(found.variables["VLLM_ARGS"])  # as systemd splits `$VLLM_ARGS`
    assert words[:4] == ["--tensor-parallel-size", "4", "--served-model-name", "my model"]
    assert words[4:] == ["--max-num-seqs", "256"]


def test_inside_a_bash_string_the_word_is_changed_in_the_string() -> None:
    script = "source /opt/venv/bin/activate && vllm serve m --max-num-seqs '1024' 2>&1 | tee log"
    found = resolve(unit("/bin/bash", "-c", script), "--max-num-seqs", "256")
    assert found.current == "1024" and "shell string" in found.where
    assert found.argv == (
        "/bin/bash",
        "-c",
        "source /opt/venv/bin/activate && vllm serve m --max-num-seqs 256 2>&1 | tee log",
    )
    added = resolve(unit("/bin/sh", "-c", "exec vllm serve m; echo done"), "--max-num-seqs", "256")
    assert added.argv == ("/bin/sh", "-c", "exec vllm serve m --max-num-seqs 256; echo done")


def test_a_shell_variable_is_the_scripts_own_or_the_units() -> None:
    own = resolve(
        unit("/bin/bash", "-c", "S=1024; exec vllm serve m --max-num-seqs $S", env=("S=2",)),
        "--max-num-seqs",
        "256",
    )
    assert own.current == "1024"
    assert own.argv == ("/bin/bash", "-c", "S=256; exec vllm serve m --max-num-seqs $S")
    # `${S}` is systemd's: expanded from the unit's environment before the shell runs.
    units = resolve(
        unit("/bin/bash", "-c", "S=1024; exec vllm serve m --max-num-seqs ${S}", env=("S=2",)),
        "--max-num-seqs",
        "256",
    )
    assert units.current == "2" and units.variables == {"S": "256"}


def wrapper(tmp_path: Path, body: str) -> str:
    script = tmp_path / "start-vllm.sh"
    script.write_text("#!/bin/bash\nset -euo pipefail\n" + body)
    return str(script)


def test_a_wrapper_passing_its_arguments_on_gets_the_flag_on_its_command_line(
    tmp_path: Path,
) -> None:
    script = wrapper(tmp_path, 'exec vllm serve "$MODEL" --port 8000 "$@"\n')
    found = resolve(unit(script, "--max-num-seqs", "1024"), "--max-num-seqs", "256")
    assert found.current == "1024" and found.argv == (script, "--max-num-seqs", "256")
    added = resolve(unit(script), "--max-num-seqs", "256")
    assert added.argv == (script, "--max-num-seqs", "256")


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ("exec vllm serve m \\\n  --max-num-seqs 1024\n", "start-vllm.sh line 4"),
        ('SEQS=1024\nexec vllm serve m --max-num-seqs "$SEQS"\n', "SEQS set in"),
        ("exec vllm serve m --port 8000\n", 'without passing its own arguments on ("$@")'),
    ],
)
def test_a_value_a_wrapper_sets_itself_is_refused_naming_the_place(
    tmp_path: Path, body: str, named: str
) -> None:
    script = wrapper(tmp_path, body)
    found = resolve(unit(script), "--max-num-seqs", "256")
    assert found.refused is not None and named in found.refused
    assert found.argv is None and not found.variables


def test_a_file_the_wrapper_sources_is_named(tmp_path: Path) -> None:
    config = tmp_path / "config.sh"
    config.write_text("MAX_NUM_SEQS=1024\n")
    script = wrapper(tmp_path, f'. {config}\nexec vllm serve m --max-num-seqs "$MAX_NUM_SEQS"\n')
    found = resolve(unit(script), "--max-num-seqs", "256")
    assert found.refused is not None and str(config) in found.refused


def test_the_units_variable_read_by_a_wrapper_is_overridden(tmp_path: Path) -> None:
    script = wrapper(tmp_path, 'exec vllm serve m --max-num-seqs "${MAX_NUM_SEQS:-64}"\n')
    found = resolve(unit(script, env=("MAX_NUM_SEQS=1024",)), "--max-num-seqs", "256")
    assert found.current == "1024" and found.variables == {"MAX_NUM_SEQS": "256"}
    default = resolve(unit(script), "--max-num-seqs", "256")
    assert default.current == "64" and default.variables == {"MAX_NUM_SEQS": "256"}


def test_a_container_has_its_flags_after_the_image_and_its_own_environment() -> None:
    docker = (
        "/usr/bin/docker", "run", "--rm", "--name", "tgi", "-e", "MAX_BATCH_PREFILL_TOKENS=16384",
        "ghcr.io/huggingface/text-generation-inference:3.0.1", "--model-id", "m",
    )  # fmt: skip
    found = resolve(unit(*docker), "--max-batch-prefill-tokens", "8192")
    assert found.current == "16384"
    assert found.argv is not None and found.argv[6] == "MAX_BATCH_PREFILL_TOKENS=8192"
    # The unit's own variable does not reach the container's engine.
    bare = resolve(unit(*docker[:5], *docker[7:], env=("MAX_BATCH_PREFILL_TOKENS=1",)),
                   "--max-batch-prefill-tokens", "8192")  # fmt: skip
    assert bare.current is None and bare.argv == (
        *docker[:5],
        *docker[7:],
        "--max-batch-prefill-tokens",
        "8192",
    )


def test_no_engine_or_not_its_flag_is_a_refusal() -> None:
    with pytest.raises(Refusal, match="runs no engine advisor knows"):
        resolve(unit("/usr/sbin/sshd", "-D"), "--max-num-seqs", "256")
    with pytest.raises(Refusal, match="not a flag of SGLang"):
        resolve(unit("python3", "-m", "sglang.launch_server"), "--max-num-seqs", "256")
    stale = UnitSnapshot(
        "v.service", exec_start=(ExecCommand(*VLLM[:1], VLLM),), need_daemon_reload=True
    )
    with pytest.raises(Refusal, match="daemon-reload"):
        resolve(stale, "--max-num-seqs", "256")
