"""Model resolution (hub name, local folder, packaged offline models) and tiny test models."""

from __future__ import annotations

from pathlib import Path

import pytest

from zdebias.errors import ConfigError
from zdebias.models import resolve_model
from zdebias.models.tiny import make_tiny_model


def test_hub_names_and_local_folders_pass_through(tmp_path: Path) -> None:
    assert resolve_model("roberta-large") == "roberta-large"
    assert resolve_model("openai-community/gpt2-large") == "openai-community/gpt2-large"
    assert resolve_model(tmp_path) == str(tmp_path.resolve())
    with pytest.raises(ConfigError, match="no such model folder"):
        resolve_model("./does-not-exist")
    (tmp_path / "f.bin").write_text("x")
    with pytest.raises(ConfigError, match="must be a folder"):
        resolve_model(tmp_path / "f.bin")


@pytest.mark.real_model
def test_minilm_is_packaged_bert() -> None:
    path = Path(resolve_model("minilm"))
    assert (path / "config.json").exists() and (path / "model.safetensors").exists()
    from transformers import AutoConfig, AutoTokenizer

    assert AutoConfig.from_pretrained(path).model_type == "bert"
    tok = AutoTokenizer.from_pretrained(path)
    assert tok.tokenize("A man is sleeping") == ["a", "man", "is", "sleeping"]


@pytest.mark.slow
@pytest.mark.real_model
def test_smollm2_converted_once_and_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("ZDEBIAS_CACHE", str(tmp_path))
    path = Path(resolve_model("smollm2"))
    assert path == tmp_path / "models" / "smollm2"
    assert (path / "config.json").exists()
    start = time.perf_counter()
    assert resolve_model("smollm2") == str(path)
    assert time.perf_counter() - start < 1.0, "second resolve must reuse the cached folder"
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert model.config.model_type == "llama"
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    ids = tok("The capital of France is", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=3, do_sample=False)
    assert "Paris" in tok.decode(out[0][ids["input_ids"].shape[1] :])


@pytest.mark.parametrize(
    ("kind", "cls"),
    [
        ("bert", "BertForSequenceClassification"),
        ("gpt2", "GPT2LMHeadModel"),
        ("llama", "LlamaForCausalLM"),
        ("t5", "T5ForConditionalGeneration"),
    ],
)
def test_tiny_models_load_and_run(tmp_path: Path, kind: str, cls: str) -> None:
    import torch
    from transformers import AutoConfig, AutoTokenizer

    path = make_tiny_model(kind, tmp_path / kind)
    tok = AutoTokenizer.from_pretrained(path)
    config = AutoConfig.from_pretrained(path)
    assert config.architectures == [cls]
    import transformers

    model = getattr(transformers, cls).from_pretrained(path)
    assert sum(p.numel() for p in model.parameters()) < 200_000
    enc = tok(["A man is sleeping."], return_tensors="pt")
    with torch.no_grad():
        if kind == "t5":
            out = model(**enc, labels=enc["input_ids"])
        elif kind == "bert":
            out = model(**enc)
            assert out.logits.shape == (1, 3)
            assert config.id2label == {0: "entailment", 1: "neutral", 2: "contradiction"}
            return
        else:
            out = model(**enc, labels=enc["input_ids"])
    assert torch.isfinite(out.loss)
    # a real sub-word tokenizer: an unseen word splits into several pieces
    assert len(tok.tokenize("Unbelievably")) > 1


def test_tiny_model_fixture_copies(tiny_model) -> None:
    a, b = tiny_model("gpt2"), tiny_model("gpt2")
    assert a != b and (a / "config.json").exists() and (b / "config.json").exists()
