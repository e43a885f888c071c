"""Static training shapes (``data.length_bucket``): one (rows, L) shape per bucket, every example once per epoch,
filler rows never scored, the order a function of (seed, epoch), and torch.compile compiling no more after it has
seen each bucket once."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ablate.data.batching import TokenBatchSampler, bucket_length, bucket_rows, pack
from ablate.data.collate import Seq2SeqCollator

BUCKET, MAX_TOKENS, PAD = 8, 96, 0


@pytest.fixture
def lengths():
    rng = np.random.default_rng(3)
    src = rng.integers(2, 30, 400)
    tgt = np.clip(src + rng.integers(-3, 4, 400), 1, 31)
    return src, tgt


def _sampler(src, tgt, **kwargs):
    kwargs = {"max_tokens": MAX_TOKENS, "seed": 5, "bucket": BUCKET, **kwargs}
    return TokenBatchSampler(np.maximum(src, tgt + 1), then_by=(src, tgt), **kwargs)


def _pairs(src, tgt, idx):
    return [(list(range(3, 3 + src[i])), list(range(3, 3 + tgt[i]))) for i in idx]


def test_bucket_length_and_rows_follow_the_token_budget():
    assert [bucket_length(n, 8) for n in (1, 8, 9, 16, 17)] == [8, 8, 16, 16, 24]
    assert [bucket_rows(n, 8, 96) for n in (1, 9, 17, 97)] == [12, 6, 4, 1]


def test_every_batch_has_its_buckets_shape_and_holds_each_example_once(lengths):
    src, tgt = lengths
    sampler = _sampler(src, tgt)
    collate = Seq2SeqCollator(PAD, 1, 2, BUCKET, MAX_TOKENS)
    batches = sampler.batches(0)
    assert sorted(i for b in batches for i in b) == list(range(len(src)))
    shapes = set()
    for idx in batches:
        longest = max(max(src[i], tgt[i] + 1) for i in idx)
        L = bucket_length(longest, BUCKET)
        batch = collate(_pairs(src, tgt, idx))
        assert {tuple(x.shape) for x in batch.values()} == {(MAX_TOKENS // L, L)}
        shapes.add((MAX_TOKENS // L, L))
        real = (batch["labels"] != PAD).sum(1)  # (rows,)
        assert real[: len(idx)].tolist() == [tgt[i] + 1 for i in idx]  # y + EOS scored on every real row
        assert not real[len(idx):].any()  # filler rows: nothing scored
        assert (batch["src_ids"][len(idx):] == batch["src_ids"][0]).all()  # ... and a real source to attend to
    assert len(shapes) == len({bucket_length(max(s, t + 1), BUCKET) for s, t in zip(src, tgt)}) <= 32 // BUCKET


def test_real_rows_equal_the_unbucketed_batch_padded(lengths):
    src, tgt = lengths
    idx = _sampler(src, tgt).batches(0)[0]
    plain = Seq2SeqCollator(PAD, 1, 2)(_pairs(src, tgt, idx))
    bucketed = Seq2SeqCollator(PAD, 1, 2, BUCKET, MAX_TOKENS)(_pairs(src, tgt, idx))
    for key, x in plain.items():
        B, T = x.shape
        assert torch.equal(bucketed[key][:B, :T], x) and (bucketed[key][:B, T:] == PAD).all()


def test_the_order_is_a_function_of_seed_and_epoch_and_resumes_mid_epoch(lengths):
    src, tgt = lengths
    a, b = _sampler(src, tgt), _sampler(src, tgt)
    assert a.batches(1) == b.batches(1) and a.batches(0) != a.batches(1)
    assert a.batches(0) != _sampler(src, tgt, seed=6).batches(0)
    b.start_at(0, 7)
    assert list(b) == list(a)[7:]


def test_off_the_packing_is_the_papers_as_before(lengths):
    src, tgt = lengths
    plain = TokenBatchSampler(np.maximum(src, tgt + 1), then_by=(src, tgt), max_tokens=MAX_TOKENS, seed=5)
    rng = plain.rng(0)
    expected = pack(plain._order(rng), plain.lengths, MAX_TOKENS)
    assert plain.batches(0) == [expected[i] for i in rng.permutation(len(expected))]


def test_a_bucket_must_be_positive(lengths):
    with pytest.raises(ValueError, match="bucket=0"):
        _sampler(*lengths, bucket=0)


@pytest.mark.slow  # compiling takes seconds on a CPU
def test_compile_sees_no_new_shape_after_one_batch_of_each_bucket(lengths):
    """Static shapes (dynamic=False, as CUDA graphs need them): one graph per bucket, none after the warm-up; the
    paper's packing would need one per distinct (B, S, T)."""
    src, tgt = lengths
    collate = Seq2SeqCollator(PAD, 1, 2, BUCKET, MAX_TOKENS)
    batches = [collate(_pairs(src, tgt, idx)) for idx in _sampler(src, tgt).batches(0)]
    plain = [Seq2SeqCollator(PAD, 1, 2)(_pairs(src, tgt, idx)) for idx in _sampler(src, tgt, bucket=None).batches(0)]
    n_plain = len({(b["src_ids"].shape, b["tgt_ids"].shape) for b in plain})
    emb = torch.nn.Embedding(40, 8)

    def step(b):  # embedding, padding mask, a batched product and a masked mean: shape-dependent code
        x = emb(b["src_ids"]) * (b["src_ids"] != PAD)[..., None]
        y = emb(b["tgt_ids"])
        return (y @ x.transpose(1, 2)).masked_fill((b["labels"] == PAD)[..., None], 0).mean()

    compiled = torch.compile(step, dynamic=False)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    first: dict[tuple, int] = {}
    for i, b in enumerate(batches):
        first.setdefault(tuple(b["src_ids"].shape), i)
    for i in first.values():  # warm-up: one batch of each bucket
        compiled(batches[i])
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == len(first) <= 32 // BUCKET < n_plain
    torch._dynamo.utils.counters.clear()
    for b in batches:
        torch.testing.assert_close(compiled(b), step(b))
    assert not torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert not torch._dynamo.utils.counters["recompiles"]
