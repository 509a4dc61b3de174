"""Phrase encoders of Binding paper §2: CSP, the CDSMs (Add, Mult, Conv, TL, RF) and CLIP-FT.

Every model maps phrases (``"red cube"``, ``"cube left sphere"``) to vectors in CLIP's joint
image–text space. Scores (``CDSM_SCORES``):

* CDSMs, ``score="dot"`` (default): Algorithm 1 of the paper (Appendix B),
  ``l = x · T(a, n)`` — the dot product of the unit-normalised frozen CLIP image embedding (the
  authors' models normalise it) with the *unnormalised* composed phrase vector, no temperature;
  parameters initialised like ``nn.Embedding`` (N(0, 1)), as in the authors' models.
* CDSMs, ``score="scaled-cosine"``: conceptforge's first version — CLIP's ``logit_scale`` times
  the cosine of image and phrase, parameters N(0, 1/d). A different classifier: its argmax
  agrees with the dot product's on only 81–99% of images (issue 15).
* CSP and CLIP-FT run CLIP's own text tower and keep CLIP's ``logit_scale × cosine``. CDSM parameters live directly in that space
(dimension = CLIP's projection dim), which reproduces Table 8's parameter counts: e.g. Add on the
single-object data has (8 colours + 3 shapes) × 768 = 8,448 parameters.

Compositions (adjective–noun / subject–relation–object):

* Add  ``a + n`` / ``s + R + o``;  Mult ``a ⊙ n`` / ``s ⊙ R ⊙ o``;  Conv ``a ⊛ n`` / ``s ⊛ R ⊛ o``
  (circular convolution, via FFT) — all insensitive to word order;
* TL   ``A · n`` / ``s ⊙ (R · o)`` — adjectives and relations are matrices;
* RF   ``a ⊛ r_a + n ⊛ r_n`` / ``s ⊛ r_s + R ⊛ r_R + o ⊛ r_o`` — role–filler bindings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from conceptforge.errors import DataFormatError, InvalidArgumentError
from conceptforge.loaders.binding.data import ADJ_NOUN, RELATIONAL, BindingSplit, parse_label

CDSM_KINDS = ("add", "mult", "conv", "tl", "rf")
CDSM_SCORES = ("dot", "scaled-cosine")
MODEL_KINDS = ("csp", *CDSM_KINDS, "clip-ft")
# Appendix A learning rates.
DEFAULT_LR = {"csp": 1e-6, "clip-ft": 1e-7, **{kind: 5e-4 for kind in CDSM_KINDS}}
PROMPT = "a photo of {label}"


def circular_convolution(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``c_i = Σ_j a_j b_{(i−j) mod n}`` over the last dim, in O(n log n) via the real FFT."""
    n = a.shape[-1]
    return torch.fft.irfft(torch.fft.rfft(a, dim=-1) * torch.fft.rfft(b, dim=-1), n=n, dim=-1)


def circular_convolution_direct(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The O(n²) definition (reference for tests)."""
    n = a.shape[-1]
    index = (torch.arange(n)[:, None] - torch.arange(n)[None, :]) % n  # [i, j] -> (i - j) mod n
    return torch.einsum("...j,...ij->...i", a, b[..., index])


@dataclass
class Vocabulary:
    """Words of a binding dataset, by role."""

    setting: str
    nouns: list[str]
    adjectives: list[str]
    relations: list[str]

    @classmethod
    def from_splits(cls, splits: Sequence[BindingSplit]) -> Vocabulary:
        phrases = {p for split in splits for row in split.candidates for p in row} | {
            label for split in splits for label in split.labels
        }
        parsed = [parse_label(p) for p in sorted(phrases)]
        if not parsed:
            raise DataFormatError("the binding dataset has no labels")
        if len(parsed[0]) == 2:
            return cls(ADJ_NOUN, sorted({n for _, n in parsed}), sorted({a for a, _ in parsed}), [])
        return cls(RELATIONAL, sorted({w for s, _, o in parsed for w in (s, o)}), [], sorted({r for _, r, _ in parsed}))

    @classmethod
    def from_release(cls, splits: Sequence[BindingSplit], spec_words: dict[str, list[str]] | None) -> Vocabulary:
        """The release's own vocabulary when it was made from a spec (every colour, shape and
        relation the spec names, in its order, even those no sampled label uses); else the words
        of the labels and candidates."""
        found = cls.from_splits(splits)
        if spec_words is None:
            return found
        if found.setting == ADJ_NOUN:
            vocab = cls(ADJ_NOUN, list(spec_words["shapes"]), list(spec_words["colors"]), [])
        else:
            vocab = cls(RELATIONAL, list(spec_words["shapes"]), [], list(spec_words["relations"]))
        unknown = sorted(set(found.words) - set(vocab.words))
        if unknown:
            raise DataFormatError(
                f"the labels use {', '.join(unknown)}, which the release's benchmark_spec.yaml does not name"
            )
        return vocab

    @property
    def words(self) -> list[str]:
        return self.adjectives + self.nouns + self.relations

    def indices(self, phrases: Sequence[str]) -> torch.Tensor:
        """[P, 2 or 3] word indices into :attr:`words`."""
        position = {w: i for i, w in enumerate(self.words)}
        try:
            return torch.tensor([[position[w] for w in parse_label(p)] for p in phrases], dtype=torch.long)
        except KeyError as error:
            raise DataFormatError(f"word {error.args[0]!r} is not in the model's vocabulary") from None


class PhraseModel(nn.Module):
    """Base: ``encode(phrases) -> [P, D]``; ``encode_images(batch) -> [B, D]`` (identity when frozen)."""

    trains_images = False

    def encode(self, phrases: Sequence[str]) -> torch.Tensor:  # pragma: no cover - interface
        raise NotImplementedError

    def encode_images(self, batch: Any) -> torch.Tensor:
        return batch


class CDSM(PhraseModel):
    """Add / Mult / Conv / TL / RF with randomly initialised parameters (Appendix A).

    ``score`` (``"dot"`` or ``"scaled-cosine"``, module docstring) also picks the initialisation:
    N(0, 1) like the authors' ``nn.Embedding`` tables for ``"dot"``; N(0, 1/d) (the HRR
    convention, vectors of norm ~1) for ``"scaled-cosine"``.
    """

    def __init__(
        self, kind: str, vocab: Vocabulary, dim: int, *, generator: torch.Generator | None = None, score: str = "dot"
    ) -> None:
        super().__init__()
        if kind not in CDSM_KINDS:
            raise InvalidArgumentError(f"unknown CDSM {kind!r} (choose from {', '.join(CDSM_KINDS)})")
        if score not in CDSM_SCORES:
            raise InvalidArgumentError(f"unknown CDSM score {score!r} (choose from {', '.join(CDSM_SCORES)})")
        self.kind, self.vocab, self.dim, self.score = kind, vocab, dim, score
        scale = 1.0 if score == "dot" else dim**-0.5

        def randn(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=generator) * scale)

        words = vocab.words
        if kind == "tl":
            # vectors for nouns; matrices for adjectives (adj-noun) or relations (relational)
            self.vectors = randn(len(words), dim)
            operators = vocab.adjectives if vocab.setting == ADJ_NOUN else vocab.relations
            self.operator_index = {w: i for i, w in enumerate(operators)}
            self.matrices = randn(len(operators), dim, dim)
        else:
            self.vectors = randn(len(words), dim)
        if kind == "rf":
            self.roles = randn(2 if vocab.setting == ADJ_NOUN else 3, dim)

    def encode(self, phrases: Sequence[str]) -> torch.Tensor:
        idx = self.vocab.indices(phrases).to(self.vectors.device)
        v = self.vectors[idx]  # [P, arity, D]
        if self.kind == "add":
            return v.sum(dim=1)
        if self.kind == "mult":
            return v.prod(dim=1)
        if self.kind == "conv":
            out = v[:, 0]
            for k in range(1, v.shape[1]):
                out = circular_convolution(out, v[:, k])
            return out
        if self.kind == "rf":
            return circular_convolution(v, self.roles[None].expand_as(v)).sum(dim=1)
        # tl: apply every operator to every word vector once (|ops| x |words| x d^2, small), then
        # gather — gathering one d x d matrix per phrase would move |phrases| x d^2 floats per step.
        words = self.vocab.words
        op_position, arg_position = (0, 1) if self.vocab.setting == ADJ_NOUN else (1, 2)
        ops = torch.tensor([self.operator_index[words[i]] for i in idx[:, op_position].tolist()], device=v.device)
        args, arg_slot = torch.unique(idx[:, arg_position], return_inverse=True)
        applied = torch.matmul(self.matrices, self.vectors[args].T).transpose(1, 2)  # [ops, args, D]
        composed = applied[ops, arg_slot]
        return composed if self.vocab.setting == ADJ_NOUN else v[:, 0] * composed


class _FrozenClipText(PhraseModel):
    """Shared plumbing for models that run CLIP's text tower."""

    def __init__(self, embedder: Any) -> None:
        super().__init__()
        self.clip = embedder.model
        self.tokenizer = getattr(embedder.processor, "tokenizer", embedder.processor)
        self.device_ = embedder.device


class CSP(_FrozenClipText):
    """Compositional soft prompting: one learned token embedding per word, inserted into
    ``a photo of [w1] [w2] ([w3])`` and run through the frozen CLIP text encoder.

    Tokens are initialised with the mean embedding of the word's BPE tokens (Appendix A). They are
    spliced in by a forward hook on the token-embedding layer, so the model's own forward (causal
    mask, EOS pooling, projection) runs unchanged.
    """

    def __init__(self, embedder: Any, vocab: Vocabulary, *, prefix: str = "a photo of") -> None:
        super().__init__(embedder)
        for parameter in self.clip.parameters():
            parameter.requires_grad_(False)
        self.vocab = vocab
        token_embedding = self.clip.text_model.embeddings.token_embedding
        init = []
        for word in vocab.words:
            ids = self.tokenizer(word, add_special_tokens=False)["input_ids"]
            init.append(token_embedding.weight[torch.tensor(ids, device=token_embedding.weight.device)].mean(dim=0))
        self.soft = nn.Parameter(torch.stack(init).detach().clone().float())
        prefix_ids = self.tokenizer(prefix)["input_ids"]  # [bos, ..., eos]
        self.prefix_ids = list(prefix_ids[:-1])
        self.eos_id = prefix_ids[-1]
        self.filler_id = self.prefix_ids[-1]  # any id below EOS; its embedding is replaced
        self._pending: torch.Tensor | None = None
        self._hook = token_embedding.register_forward_hook(self._splice)

    def _splice(self, module: nn.Module, inputs: Any, output: torch.Tensor) -> torch.Tensor | None:
        if self._pending is None:
            return None
        soft = self._pending.to(output.dtype)
        start = len(self.prefix_ids)
        return torch.cat([output[:, :start], soft, output[:, start + soft.shape[1] :]], dim=1)

    def encode(self, phrases: Sequence[str]) -> torch.Tensor:
        idx = self.vocab.indices(phrases).to(self.soft.device)
        arity = idx.shape[1]
        input_ids = torch.tensor(
            [self.prefix_ids + [self.filler_id] * arity + [self.eos_id]] * len(phrases), device=self.device_
        )
        self._pending = self.soft[idx]
        try:
            from conceptforge.loaders.harness.embeddings import _features

            features = _features(self.clip.get_text_features(input_ids=input_ids))
        finally:
            self._pending = None
        return features.float()

    def remove_hook(self) -> None:
        self._hook.remove()


class ClipFT(_FrozenClipText):
    """CLIP-FT: both towers fine-tuned, prompt ``a photo of {label}`` (optional: slow, 429M params
    for ViT-L/14)."""

    trains_images = True

    def __init__(self, embedder: Any) -> None:
        super().__init__(embedder)
        self.image_processor = getattr(embedder.processor, "image_processor", embedder.processor)
        for parameter in self.clip.parameters():
            parameter.requires_grad_(True)
        self.clip.train()

    def encode(self, phrases: Sequence[str]) -> torch.Tensor:
        from conceptforge.loaders.harness.embeddings import _features

        inputs = self.tokenizer(
            [PROMPT.format(label=p) for p in phrases], padding=True, truncation=True, return_tensors="pt"
        )
        inputs = {k: v.to(self.device_) for k, v in inputs.items() if k in ("input_ids", "attention_mask")}
        return _features(self.clip.get_text_features(**inputs)).float()

    def encode_images(self, batch: Any) -> torch.Tensor:
        from conceptforge.loaders.harness.embeddings import _features, load_pil

        pixels = self.image_processor(images=[load_pil(i) for i in batch], return_tensors="pt")["pixel_values"]
        return _features(self.clip.get_image_features(pixel_values=pixels.to(self.device_))).float()


def build_model(
    kind: str, vocab: Vocabulary, *, embedder: Any, dim: int, seed: int, cdsm_score: str = "dot"
) -> PhraseModel:
    generator = torch.Generator().manual_seed(seed)
    if kind in CDSM_KINDS:
        return CDSM(kind, vocab, dim, generator=generator, score=cdsm_score)
    if kind == "csp":
        return CSP(embedder, vocab)
    if kind == "clip-ft":
        import copy

        clone = copy.copy(embedder)
        clone.model = copy.deepcopy(embedder.model)  # never tune the shared, cached encoder
        return ClipFT(clone)
    raise InvalidArgumentError(f"unknown model {kind!r} (choose from clip, {', '.join(MODEL_KINDS)})")
