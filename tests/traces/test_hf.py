"""`ahasd trace record hf` on tiny randomly initialised models built from configs (no downloads).

Skipped, with the reason, only when the optional extra (torch, transformers) is not importable.
"""

from __future__ import annotations

import numpy as np
import pytest

from ahasd.cli import main
from ahasd.errors import UserError
from ahasd.sim.traces.format import load_trace
from ahasd.sim.traces.hf import record_hf

torch = pytest.importorskip("torch", reason="optional extra 'hf' not installed: no torch")
transformers = pytest.importorskip(
    "transformers", reason="optional extra 'hf' not installed: no transformers"
)


def tiny_llama(folder, *, seed: int, layers: int, vocab: int = 64):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    model = transformers.LlamaForCausalLM(config)
    model.save_pretrained(folder)
    return model.eval()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    draft = tiny_llama(root / "draft", seed=1, layers=1)
    target = tiny_llama(root / "target", seed=2, layers=2)
    return root, draft, target


def full_forward_distribution(model, ids, temperature, size):
    """Independent reference: a cache-free forward pass and torch's softmax."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    probs = torch.softmax(logits / temperature, dim=-1).numpy()
    return np.pad(probs, (0, size - probs.size))


def test_recorded_values_match_cache_free_forward(models):
    root, draft, target = models
    trace = record_hf(
        str(root / "draft"), str(root / "target"), length=30, prompt_ids=[1, 2, 3], seed=4
    )
    assert len(trace) == 30
    assert trace.header.source == "recorded"
    ids = trace.header.meta["prompt_ids"] + trace.header.meta["output_ids"]
    for pos in (0, 7, 29):
        prefix = ids[: 3 + pos]
        q = full_forward_distribution(draft, prefix, 1.0, 64)
        p = full_forward_distribution(target, prefix, 1.0, 64)
        assert trace.beta[pos] == pytest.approx(np.minimum(p, q).sum(), abs=1e-5)
        assert trace.draft_top1[pos] == pytest.approx(q.max(), abs=1e-5)
        assert trace.draft_entropy[pos] == pytest.approx(-(q * np.log(q)).sum(), abs=1e-5)
        assert trace.target_entropy[pos] == pytest.approx(-(p * np.log(p)).sum(), abs=1e-5)


def test_greedy_beta_is_argmax_agreement(models):
    root, draft, target = models
    trace = record_hf(
        str(root / "draft"), str(root / "target"), length=12, temperature=0.0, prompt_ids=[5]
    )
    ids = trace.header.meta["prompt_ids"] + trace.header.meta["output_ids"]
    for pos in range(12):
        with torch.no_grad():
            qa = int(draft(input_ids=torch.tensor([ids[: 1 + pos]])).logits[0, -1].argmax())
            pa = int(target(input_ids=torch.tensor([ids[: 1 + pos]])).logits[0, -1].argmax())
        assert trace.beta[pos] == (1.0 if qa == pa else 0.0)
        assert ids[1 + pos] == pa  # greedy output follows the target


def test_different_vocabulary_sizes_are_padded(tmp_path, models):
    root, draft, _ = models
    wide = tiny_llama(tmp_path / "wide", seed=3, layers=1, vocab=72)
    trace = record_hf(str(root / "draft"), str(tmp_path / "wide"), length=5, prompt_ids=[1], seed=1)
    q = full_forward_distribution(draft, [1], 1.0, 72)
    p = full_forward_distribution(wide, [1], 1.0, 72)
    assert trace.beta[0] == pytest.approx(np.minimum(p, q).sum(), abs=1e-5)
    assert trace.header.meta["vocab_target"] == 72


def test_cli_with_text_prompt_and_tokenizer(tmp_path, models, capsys):
    root, _, _ = models
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, **{f"w{i}": i for i in range(1, 64)}}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    tokenizer.save_pretrained(tmp_path / "tok")
    out = tmp_path / "hf.jsonl"
    code = main(
        [
            "trace", "record", "hf",
            "--draft", str(root / "draft"), "--target", str(root / "target"),
            "--tokenizer", str(tmp_path / "tok"), "--prompt", "w1 w2 w3",
            "--length", "8", "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0
    trace = load_trace(out)
    assert trace.header.meta["prompt_ids"] == [1, 2, 3]
    assert len(trace) == 8


def test_errors(tmp_path, models, capsys):
    root, _, _ = models
    with pytest.raises(UserError, match="draft model folder not found"):
        record_hf(str(tmp_path / "none"), str(root / "target"), length=2, prompt_ids=[1])
    with pytest.raises(UserError, match="exactly one of --prompt and --prompt-ids"):
        record_hf(str(root / "draft"), str(root / "target"), length=2)
    code = main(
        ["trace", "record", "hf", "--draft", str(root / "draft"), "--target", str(root / "target"),
         "--prompt-ids", "1,x", "--out", str(tmp_path / "o.jsonl")]
    )  # fmt: skip
    assert code == 2
    assert "--prompt-ids must be comma-separated integers" in capsys.readouterr().err
    bad = tmp_path / "notamodel"
    bad.mkdir()
    with pytest.raises(UserError, match="cannot load the target model"):
        record_hf(str(root / "draft"), str(bad), length=2, prompt_ids=[1])
