"""Generative VLMs (``AutoModelForImageTextToText`` with a chat template): ``match`` and ``choose``.

* ``match`` is VQAScore (Lin et al. 2024, t2v_metrics) in the variant of the model's family or the
  one the task's ``vqascore`` option names (``adapters/vqascore.py``: t2v_metrics' own rule and
  prompt for LLaVA-1.5, InstructBLIP, Qwen2-VL and LLaVA-OneVision; else ours, the next-token
  probability of "Yes" after "<image> Does this figure show "{text}"? Please answer yes or no." —
  the whole vocabulary's softmax, not renormalised over yes/no, as ConceptBed's ViLT oracle reads
  P("yes"); "Yes" and " Yes" both counted when each is one token). The score is returned, cached
  and written as its **natural logarithm in float64** (``score_scale = "log-probability"``): a
  model that says "No" confidently gives P(Yes) of 1e-48…1e-88, which float32 rounds to 0.0 for
  every caption, and the ranking (the tie rule, ``loaders/binding/scoring.py``) would see ties.
  Beside each score, P("Yes") + P("No") at the answer's first token is kept (``allowed_mass``).
* ``answer-text`` (the by-answer protocols, ``loaders/harness/by_answer.py``): the model's own
  words, greedy (``do_sample=False``, one beam), ``max_new_tokens`` at most, batched with left
  padding; the inputs are the probability path's (the same chat prompt and image preprocessing,
  ``VQAScorer._encode``), so a by-answer and a probability run ask the model the same tokens.
* ``choose`` is the SUB filter's rule (``filters/vqa/scorer.py``, shared, not copied): the options are
  lettered A, B, … in the question, and each option's probability is its letter's next-token
  probability, normalised over the options.

Both run through the filter's :class:`~conceptforge.filters.vqa.scorer.VQAScorer`: batches of
(image, prompt) pairs in one forward, right-padded and read at each row's last token, with the
next batch preprocessed while the model runs. Every number is cached on disk per (model
revision, dtype, image content, prompt), like the embedding cache, so a second task or a rerun
asking the same question of the same image reads it back; a value is always returned as the
cache stores it (log-probabilities as float64, option distributions as float32), so a cached and
a computed run write the same rows.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from conceptforge.errors import WeightsUnavailableError
from conceptforge.loaders.harness.adapters.base import VLM, load_revision
from conceptforge.loaders.harness.adapters.vqascore import LLAVA_QUESTION
from conceptforge.loaders.harness.by_answer import YES_NO_SUFFIX  # ConceptBed's questions already ask yes/no

logger = logging.getLogger(__name__)

#: t2v_metrics' LLaVA-1.5 VQAScore question (the next-token variant asks it too) and its answer.
VQASCORE_QUESTION = LLAVA_QUESTION
VQASCORE_ANSWER = "Yes"
VQASCORE_NO_ANSWER = "No"
LOG_CACHE_SUFFIX = "-log64"  # cache files of float64 log-probabilities
CHOOSE_PROTOCOL = "option letters: next-token probability of each option's letter, normalised over the options"


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:120] or "model"


class GenerativeVLMAdapter:
    """VQAScore ``match``, option-letter ``choose``, yes/no ``answer`` — cached."""

    family = VLM
    kind = "vlm"  # CompMap's activation key and progress label
    score_scale = "log-probability"  # match scores are ln VQAScore, float64: ranked exactly

    def __init__(
        self,
        scorer: Any,
        *,
        revision: str,
        cache_dir: str | Path | None,
        vqascore: str | None = None,
        model_type: str | None = None,
    ) -> None:
        from conceptforge.loaders.harness.adapters.vqascore import vqascore_variant
        from conceptforge.loaders.harness.embeddings import default_cache_dir

        self.vqascore = vqascore_variant(vqascore, model_type=model_type)
        self.protocol = self.vqascore.describe()
        self.scorer = scorer
        self.model_id = scorer.model_id
        self.revision = revision
        dtype = str(scorer.dtype).replace("torch.", "")
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.cache_namespace = root / "vlm-scores" / _slug(self.model_id) / _slug(revision) / dtype
        self._caches: dict[str, Any] = {}
        self._yes: list[int] | None = None
        self._no: list[int] | None = None
        self.computed = 0  # (image, prompt) pairs run through the model, not read from the cache

    # ----------------------------------------------------------------------------- cache
    def _cache(self, name: str):
        """The cache file ``name``: float32 vectors, or float64 for the ``-log64`` ones (the
        log-probabilities; the float32 files of earlier versions, ``yes-no`` and ``vqascore-*``,
        are no longer read: their zeros were underflowed probabilities)."""
        from conceptforge.loaders.harness.embeddings import EmbeddingCache

        if name not in self._caches:
            dtype = np.float64 if name.endswith(LOG_CACHE_SUFFIX) else np.float32
            self._caches[name] = EmbeddingCache(self.cache_namespace / f"{name}.sqlite", dtype=dtype)
        return self._caches[name]

    def with_vqascore(self, name: str | None) -> GenerativeVLMAdapter:
        """This adapter computing VQAScore variant ``name`` (``auto``/None: the family's default,
        as loaded): the same model and cache files (each variant caches under its own name)."""
        from conceptforge.loaders.harness.adapters.vqascore import AUTO, vqascore_variant

        if name is None or name == AUTO:
            return self
        variant = vqascore_variant(name, model_type=None)
        if variant == self.vqascore:
            return self
        other = copy.copy(self)
        other.vqascore, other.protocol = variant, variant.describe()
        return other

    @staticmethod
    def _key(image_key: str, prompt: str) -> str:
        return hashlib.sha256(f"{image_key}\n{prompt}".encode()).hexdigest()

    def _cached(self, name: str, images: Sequence[Any], prompts: Sequence[str], compute) -> list[np.ndarray]:
        """One vector per (image, prompt), of the cache's dtype; ``compute(pils, prompts)`` runs
        the missing ones (each distinct pair once) and returns their vectors."""
        from conceptforge.loaders.harness.embeddings import image_key, load_pil

        image_keys = [image_key(image) for image in images]
        keys = [self._key(k, p) for k, p in zip(image_keys, prompts)]
        cache = self._cache(name)
        found = cache.get_many(keys)
        missing: dict[str, int] = {}
        for position, key in enumerate(keys):
            if key not in found and key not in missing:
                missing[key] = position
        if missing:
            decoded: dict[str, Any] = {}
            positions = list(missing.values())
            for p in positions:  # each distinct image decoded once, however many prompts it has
                if image_keys[p] not in decoded:
                    decoded[image_keys[p]] = load_pil(images[p])
            pils = [decoded[image_keys[p]] for p in positions]
            vectors = compute(pils, [prompts[p] for p in positions])
            rows = [(key, np.asarray(vector, dtype=cache.dtype)) for key, vector in zip(missing, vectors)]
            cache.put_many(rows)
            found.update(rows)
            self.computed += len(rows)
        return [np.asarray(found[key], dtype=cache.dtype) for key in keys]

    # ----------------------------------------------------------------------------- yes/no
    def yes_token_ids(self) -> list[int]:
        if self._yes is None:
            self._yes = self.scorer.answer_token_ids(VQASCORE_ANSWER, what="answer")
        return self._yes

    def no_token_ids(self) -> list[int]:
        if self._no is None:
            self._no = self.scorer.answer_token_ids(VQASCORE_NO_ANSWER, what="answer")
        return self._no

    def _mass_ids(self) -> list[list[int]]:
        """The yes/no token ids whose mass :meth:`match_allowed_mass` reports: the variant's
        answer and its negation in the answer's case ("yes"/"no" for t2v's InstructBLIP rule)
        where each is one token, else "Yes"/"No"."""
        answer = self.vqascore.answer
        if answer != VQASCORE_ANSWER:
            negation = "no" if answer == "yes" else VQASCORE_NO_ANSWER
            try:
                return [
                    self.scorer.answer_token_ids(answer, what="answer"),
                    self.scorer.answer_token_ids(negation, what="answer"),
                ]
            except WeightsUnavailableError:
                pass  # not one token each: the capitalised pair, as the other variants
        return [self.yes_token_ids(), self.no_token_ids()]

    def _yes_vectors(self, pils: list[Any], prompts: list[str], batch_size: int) -> list[np.ndarray]:
        """[ln P(Yes), ln P(top token), Yes on top, P(Yes) + P(No)] per pair, float64: the
        logarithms straight from the log-softmax, never a probability that could underflow."""
        import torch

        from conceptforge.loaders.harness.allowed_tokens import allowed_distribution

        yes_ids, no_ids = self.yes_token_ids(), self.no_token_ids()
        yes = torch.tensor(yes_ids)
        out: list[np.ndarray] = []
        for _, log_probs in self.scorer.next_token_log_probabilities(pils, prompts, batch_size=batch_size):
            log_yes = torch.logsumexp(log_probs[:, yes].double(), dim=1)
            top = log_probs.max(dim=1)
            is_yes = torch.isin(top.indices, yes)
            mass = allowed_distribution(log_probs, [yes_ids, no_ids]).mass  # P(Yes) + P(No), log space
            out += [
                np.array([float(a), float(b), float(c), float(m)], dtype=np.float64)
                for a, b, c, m in zip(log_yes, top.values.double(), is_yes, mass)
            ]
        return out

    def _answer_logs(self, images: Sequence[Any], questions: Sequence[str], batch_size: int) -> np.ndarray:
        """[N, 4] float64 per (image, yes/no question): ln P("Yes"), ln of the top next-token
        probability, whether "Yes" is the top token, and P("Yes") + P("No")."""
        if len(images) != len(questions):
            raise ValueError("one question per image")
        vectors = self._cached(
            "yes-no" + LOG_CACHE_SUFFIX,  # not "yes-no": float32 probabilities, underflowed to 0
            images,
            list(questions),
            lambda pils, prompts: self._yes_vectors(pils, prompts, batch_size),
        )
        return np.stack(vectors) if vectors else np.zeros((0, 4), dtype=np.float64)

    def answer(self, images: Sequence[Any], questions: Sequence[str], *, batch_size: int = 8) -> np.ndarray:
        """[N, 4] float64 per (image, yes/no question): P("Yes"), the top next-token probability,
        whether "Yes" is the top token, and P("Yes") + P("No") (the mass the yes/no answers carried)."""
        values = self._answer_logs(images, questions, batch_size).copy()
        values[:, :2] = np.exp(values[:, :2])
        return values

    # ----------------------------------------------------------------------------- capabilities
    def _vqascore(self, images: Sequence[Any], texts: Sequence[Sequence[str]], batch_size: int) -> np.ndarray:
        """[pairs, 2] float64: each pair's ln VQAScore (the adapter's variant) and P("Yes") + P("No")."""
        from conceptforge.loaders.harness.adapters.vqascore import NEXT_TOKEN

        flat_images = [image for image, row in zip(images, texts) for _ in row]
        flat = [self.vqascore.question.format(text=text) for row in texts for text in row]
        if not flat:
            return np.zeros((0, 2))
        if self.vqascore.rule == NEXT_TOKEN:  # the yes/no answer's own cache
            return self._answer_logs(flat_images, flat, batch_size)[:, [0, 3]]
        vectors = self._cached(
            f"vqascore-{self.vqascore.name}{LOG_CACHE_SUFFIX}",
            flat_images,
            flat,
            lambda pils, prompts: self._variant_vectors(pils, prompts, batch_size),
        )
        return np.stack(vectors)

    def variant_prompt(self, question: str) -> str:
        """The whole prompt string the variant builds around ``question`` (its own conversation;
        the chat template's variants: the checkpoint's generation prompt), as the processor gets it."""
        from conceptforge.loaders.harness.adapters.vqascore import CHAT

        if self.vqascore.conversation == CHAT:
            return self.scorer.prompt_text(question)
        processor = self.scorer.processor
        image_token = getattr(processor, "image_token", None) or getattr(self.scorer.tokenizer, "image_token", None)
        adds_image = getattr(processor, "num_query_tokens", None) is not None  # InstructBLIP's processor
        if image_token is None and not adds_image:
            raise WeightsUnavailableError(
                f"the processor of {self.model_id} names no image token, so VQAScore {self.vqascore.name} "
                "cannot place the image in its prompt; use --task-option TASK.vqascore=next-token"
            )
        return self.vqascore.prompt(question, image_token=str(image_token), processor_adds_image=adds_image)

    def variant_answer(self) -> str:
        """What the variant teacher-forces after :meth:`variant_prompt` (its own conversation),
        e.g. "Yes</s>" for t2v's LLaVA-1.5; the chat template's: the template's own reply."""
        from conceptforge.loaders.harness.adapters.vqascore import CHAT

        if self.vqascore.conversation == CHAT:
            return self.scorer.answer_suffix(self.vqascore.answer)
        eos = self.scorer.tokenizer.eos_token
        if eos is None:
            raise WeightsUnavailableError(f"the tokenizer of {self.model_id} has no end-of-sequence token")
        return self.vqascore.answer_suffix(str(eos))

    def _variant_vectors(self, pils: list[Any], prompts: list[str], batch_size: int) -> list[np.ndarray]:
        """[ln score, P(answer) + P(negation) at the answer's first token] per pair, float64."""

        from conceptforge.loaders.harness.adapters.vqascore import CHAT, SINGLE_TOKEN
        from conceptforge.loaders.harness.allowed_tokens import allowed_distribution

        yes_no = self._mass_ids()
        out: list[np.ndarray] = []
        if self.vqascore.rule == SINGLE_TOKEN:
            token = self.scorer.tokenizer.encode(self.vqascore.answer)[0]  # t2v_metrics' id, exactly
            for _, log_probs in self.scorer.next_token_log_probabilities(pils, prompts, batch_size=batch_size):
                mass = allowed_distribution(log_probs, yes_no).mass
                out += [np.array([float(row[token]), float(m)], dtype=np.float64) for row, m in zip(log_probs, mass)]
            return out
        if self.vqascore.conversation == CHAT:
            batches = self.scorer.answer_log_probs(pils, prompts, self.vqascore.answer, batch_size=batch_size)
        else:
            batches = self.scorer.answer_log_probs(
                pils,
                [self.variant_prompt(p) for p in prompts],
                self.vqascore.answer,
                batch_size=batch_size,
                raw_suffix=self.variant_answer(),
            )
        for _, tokens, first in batches:
            score = tokens.double().mean(dim=1)  # ln exp(-mean CE): the log of the geometric mean
            mass = allowed_distribution(first, yes_no).mass
            out += [np.array([float(a), float(m)], dtype=np.float64) for a, m in zip(score, mass)]
        return out

    def match(self, images: Sequence[Any], texts: Sequence[Sequence[str]], *, batch_size: int = 8) -> list[list[float]]:
        """ln VQAScore (float64) of each image with each of its texts, all pairs batched together."""
        return _per_row(self._vqascore(images, texts, batch_size)[:, 0], texts)

    def match_allowed_mass(
        self, images: Sequence[Any], texts: Sequence[Sequence[str]], *, batch_size: int = 8
    ) -> list[list[float]]:
        """P("Yes") + P("No") at the answer's first token of each pair :meth:`match` scored (read
        back from the cache): how much of its probability the model gave a yes/no answer at all."""
        return _per_row(self._vqascore(images, texts, batch_size)[:, 1], texts)

    def choose(self, images: Sequence[Any], questions: Sequence[Any], *, batch_size: int = 8) -> list[Any]:
        """The option distribution (``filters.vqa.OptionScores``) of each image's multiple-choice
        question (``filters.questions.MultipleChoiceQuestion``)."""
        from conceptforge.filters.vqa.scorer import OptionScores

        if len(images) != len(questions):
            raise ValueError("one question per image")
        by_text = {q.text: q for q in questions}

        def compute(pils: list[Any], prompts: list[str]) -> list[np.ndarray]:
            scores = self.scorer.score(pils, [by_text[p] for p in prompts], batch_size=batch_size)
            return [np.array([*s.probs, s.raw_mass]) for s in scores]

        # "choose-log": the letters normalised in log space (the older "choose" rows were not)
        vectors = self._cached("choose-log", images, [q.text for q in questions], compute)
        return [
            OptionScores(tuple(q.options), tuple(float(x) for x in v[:-1]), float(v[-1]))
            for q, v in zip(questions, vectors)
        ]

    def answer_text(
        self, images: Sequence[Any], prompts: Sequence[str], *, max_new_tokens: int = 16, batch_size: int = 8
    ) -> list[str]:
        """The greedy answer to each (image, prompt), ``batch_size`` pairs per ``generate`` call,
        special tokens dropped and surrounding whitespace stripped (nothing else: parsing is the
        protocol's, ``by_answer.parse_choice``)."""
        from conceptforge.loaders.harness.embeddings import load_pil

        if len(images) != len(prompts):
            raise ValueError("one prompt per image")
        if max_new_tokens < 1 or batch_size < 1:
            raise ValueError("max_new_tokens and batch_size must be >= 1")
        answers: list[str] = []
        for start in range(0, len(images), batch_size):
            pils = [load_pil(image) for image in images[start : start + batch_size]]
            answers += self._generate(pils, list(prompts[start : start + batch_size]), max_new_tokens)
        return answers

    def _generate(self, pils: list[Any], prompts: list[str], max_new_tokens: int) -> list[str]:
        import torch

        inputs = left_padded(self.scorer._encode(pils, prompts))
        tokenizer = self.scorer.tokenizer
        with torch.inference_mode():
            output = self.scorer.model.generate(
                **inputs,
                do_sample=False,
                num_beams=1,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
            )
        new = output[:, inputs["input_ids"].shape[1] :]
        self.computed += len(prompts)
        return [text.strip() for text in tokenizer.batch_decode(new, skip_special_tokens=True)]

    def score_image(self, image: Any, texts: list[str], *, batch_size: int = 8):
        """[T] CompMap activations of one image: the log-odds of its VQAScore with each text
        (the analogue of BLIP's ITM log-odds; ours, the CompMap paper has no generative VLM)."""
        return log_odds(self.match([image], [texts], batch_size=batch_size)[0])

    def close(self) -> None:
        for cache in self._caches.values():
            cache.close()
        self._caches.clear()


class VQAOracleView:
    """The ConceptBed composition oracle (``filters.conceptbed_oracles.VQAOracle``'s ``score``)
    answered by a generative VLM: P("Yes") to each yes/no question, the top next-token
    probability as the max probability, and "Yes" on top as the oracle's verdict."""

    def __init__(self, adapter: GenerativeVLMAdapter, *, suffix: str = YES_NO_SUFFIX) -> None:
        self.adapter = adapter
        self.suffix = suffix

    def score(self, images: Sequence[Any], questions: Sequence[str], *, batch_size: int = 8):
        from conceptforge.filters.conceptbed.oracles import ConceptScores

        values = self.adapter.answer(
            list(images), [_capitalised(q) + self.suffix for q in questions], batch_size=batch_size
        )
        values = values.astype(np.float64)
        return ConceptScores(values[:, 0], values[:, 1], values[:, 2] > 0.5)


def left_padded(inputs: dict[str, Any]) -> dict[str, Any]:
    """The probability path's right-padded batch turned left-padded for ``generate`` (each row's
    tokens moved to the end, so every row's next token follows its last prompt token): every
    [B, T] tensor aligned with ``input_ids`` is rolled by the row's padding; the pixels stay."""
    import torch

    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    shifts = (mask.shape[1] - mask.sum(dim=1)).tolist()
    if not any(shifts):
        return inputs
    out = dict(inputs)
    for key, value in inputs.items():
        if isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape == ids.shape:
            out[key] = torch.stack([torch.roll(row, int(shift)) for row, shift in zip(value, shifts)])
    return out


def log_odds(log_p: Sequence[float]):
    """[T] float32 log-odds ln(p / (1 − p)) of scores given as ln p, with p kept in
    [1e-12, 1 − 1e-12] as CompMap's activations always were (the activation cache holds them)."""
    import torch

    p = torch.tensor(list(log_p), dtype=torch.float64).exp().clamp(1e-12, 1 - 1e-12)
    return (torch.log(p) - torch.log1p(-p)).float()


def _per_row(values: np.ndarray, texts: Sequence[Sequence[str]]) -> list[list[float]]:
    out, start = [], 0
    for row in texts:
        out.append([float(x) for x in values[start : start + len(row)]])
        start += len(row)
    return out


def _capitalised(question: str) -> str:
    return question[:1].upper() + question[1:]


def load(
    model: Any, *, device: str | None, dtype: str | None, cache_dir: str | None, placement: Any = None
) -> GenerativeVLMAdapter:
    import torch

    from conceptforge.filters.vqa.scorer import VQAScorer
    from conceptforge.loaders.harness.embeddings import embedding_revision

    revision = load_revision(model)
    scorer = VQAScorer.from_pretrained(
        model.id,
        revision=revision,
        device=device,
        dtype=getattr(torch, dtype) if dtype else None,
        placement=placement,
    )
    return GenerativeVLMAdapter(
        scorer,
        revision=embedding_revision(model.id, revision),
        cache_dir=cache_dir,
        model_type=getattr(model, "model_type", None),
    )
