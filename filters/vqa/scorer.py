"""Multiple-choice VQA scoring from the next-token logits of the option letters.

For an image and a :class:`~filters.questions.MultipleChoiceQuestion`, the model sees the chat
prompt "<image> What type of … A) … B) … Other" and we read the probability of each option
letter as the first answer token. Probabilities are normalised over the options (what the
filter ranks by); the letters' share of the whole next-token distribution is kept as
``raw_mass``, a sanity value: a model that does not answer with a letter has a small mass.

Any ``AutoModelForImageTextToText`` checkpoint with an ``AutoProcessor`` that carries a chat
template works. Batches are right-padded and read at each row's last real token, so a batch
gives the same numbers as one image at a time (left padding would shift position ids).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from conceptforge.argtypes import check_device
from conceptforge.errors import (
    DependencyMissingError,
    InvalidArgumentError,
    WeightsUnavailableError,
    one_line,
)
from conceptforge.external_errors import model_unavailable, weights_error
from conceptforge.filters.vqa.allowed import allowed_distribution
from conceptforge.filters.vqa.inputs import BatchEncoder
from conceptforge.filters.vqa.questions import LETTERS, MultipleChoiceQuestion

logger = logging.getLogger(__name__)

#: The paper's VQA model (SUB paper, §4.2). Published as remote code (InternLM2 backbone).
DEFAULT_VQA_MODEL = "OpenGVLab/InternVL2_5-8B"


@dataclass(frozen=True)
class OptionScores:
    """One image's answer distribution over a question's options."""

    options: tuple[str, ...]
    probs: tuple[float, ...]  # normalised over the options, sums to 1
    raw_mass: float  # total next-token probability of the option letters

    @property
    def answer(self) -> str:
        best = max(range(len(self.probs)), key=lambda i: (self.probs[i], -i))
        return self.options[best]

    def prob(self, option: str) -> float:
        return self.probs[self.options.index(option)]


def default_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def default_dtype(device: torch.device) -> torch.dtype:
    """bf16 on CUDA (the paper-scale models need it), fp32 on CPU (bf16 matmuls are slow there)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def _resolve_revision(model: Any) -> str | None:
    return getattr(getattr(model, "config", None), "_commit_hash", None)


def _check_remote_code(model_id: str, trust_remote_code: bool, revision: str | None) -> None:
    """Refuse a checkpoint that needs its own code unless the user explicitly allowed it."""
    from transformers import AutoConfig

    if trust_remote_code:
        logger.warning("--trust-remote-code: running Python code shipped with %s", model_id)
        return
    try:
        AutoConfig.from_pretrained(model_id, revision=revision, trust_remote_code=False)
    except ValueError as error:
        if "trust_remote_code" in str(error):
            raise InvalidArgumentError(
                f"{model_id} ships its own model code; loading it runs that code, so it needs the "
                "explicit --trust-remote-code flag (never enabled by default)"
            ) from None
        raise weights_error("VQA model", model_id, error) from None
    except OSError as error:
        if model_unavailable(model_id) is not None:
            raise weights_error("VQA model", model_id, error) from None
        raise WeightsUnavailableError(
            f"cannot load VQA model {model_id}: {one_line(error)} "
            "(a local path, or a Hub id that is cached or reachable; log in with `hf auth login` for gated models)"
        ) from None


def without_video_processor(processor_class: type) -> type:
    """``processor_class`` accepting ``video_processor=None`` (its class check needs torchvision)."""

    def check_argument_for_proper_class(self, argument_name, argument):
        if argument is None and "video" in argument_name:
            return None
        return processor_class.check_argument_for_proper_class(self, argument_name, argument)

    return type(
        processor_class.__name__,
        (processor_class,),
        {"check_argument_for_proper_class": check_argument_for_proper_class},
    )


def _load_processor(model_id: str, *, revision: str | None, trust_remote_code: bool) -> Any:
    """``AutoProcessor``, or its parts when the full processor needs torchvision.

    InternVL's processor insists on a video processor, whose class check needs torchvision;
    images never need it, so the processor is rebuilt from its tokenizer and image processor
    with ``video_processor=None``.
    """
    from transformers import AutoProcessor

    kwargs = {"revision": revision, "trust_remote_code": trust_remote_code}
    try:
        # The PIL image processor whether or not torchvision is installed (open_clip installs it):
        # the same pixels everywhere, and the ones the fast input path (vqa_inputs) reproduces.
        try:
            return AutoProcessor.from_pretrained(model_id, backend="pil", **kwargs)
        except TypeError:  # older transformers: no backend argument
            return AutoProcessor.from_pretrained(model_id, **kwargs)
    except (ImportError, ValueError, TypeError, AttributeError) as error:
        if "torchvision" not in str(error).lower() and "video" not in str(error).lower():
            raise WeightsUnavailableError(f"cannot load the processor of {model_id}: {error}") from None
        logger.info("processor of %s needs torchvision for videos; building it without a video processor", model_id)
        return _processor_without_video(model_id, kwargs, error)


def _processor_without_video(model_id: str, kwargs: dict[str, Any], error: Exception) -> Any:
    import json

    import transformers
    from huggingface_hub import hf_hub_download
    from transformers import AutoImageProcessor, AutoTokenizer

    try:
        config_path = (
            hf_hub_download(model_id, "processor_config.json", revision=kwargs["revision"])
            if not (Path(model_id) / "processor_config.json").is_file()
            else str(Path(model_id) / "processor_config.json")
        )
        processor_config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    except Exception:
        processor_config = {}
    name = processor_config.get("processor_class")
    processor_class = getattr(transformers, name, None) if name else None
    if processor_class is None:
        raise DependencyMissingError(f"cannot build the processor of {model_id} without torchvision: {error}") from None
    tokenizer = AutoTokenizer.from_pretrained(model_id, **kwargs)
    try:
        image_processor = AutoImageProcessor.from_pretrained(model_id, backend="pil", **kwargs)
    except TypeError:  # older transformers: no backend argument
        image_processor = AutoImageProcessor.from_pretrained(model_id, **kwargs)
    extra = {
        k: v
        for k, v in processor_config.items()
        if k not in {"processor_class", "image_processor", "video_processor", "tokenizer", "auto_map"}
        and not isinstance(v, dict)
    }
    chat_template = getattr(tokenizer, "chat_template", None)
    for template_name in ("chat_template.jinja", "chat_template.json"):
        path = Path(model_id) / template_name
        if chat_template is None and path.is_file():
            text = path.read_text(encoding="utf-8")
            chat_template = json.loads(text)["chat_template"] if template_name.endswith(".json") else text
    return without_video_processor(processor_class)(
        image_processor=image_processor, tokenizer=tokenizer, video_processor=None, chat_template=chat_template, **extra
    )


@torch.inference_mode()
def next_token_logits(model: Any, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """Logits at each row's last real token, without materialising [B, L, vocab] (the scorer's
    forward; the GPU device check times it at InternVL-2.5-8B's shape)."""
    mask = inputs["attention_mask"]
    last = mask.shape[1] - 1 - mask.flip(1).int().argmax(dim=1)
    rows = torch.arange(mask.shape[0], device=mask.device)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    backbone = getattr(model, "model", None)
    if head is not None and backbone is not None:
        hidden = backbone(**inputs).last_hidden_state
        return head(hidden[rows, last]).float()
    logits = model(**inputs).logits
    return logits[rows, last].float()


class VQAScorer:
    """Option-letter probabilities of a vision-language model for multiple-choice questions."""

    def __init__(
        self,
        model: Any,
        processor: Any,
        *,
        model_id: str = "",
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        self.device = device or next(model.parameters()).device
        self.dtype = dtype or next(model.parameters()).dtype
        self.model = model.eval()
        self.processor = processor
        self.model_id = model_id
        self.revision = _resolve_revision(model)
        tokenizer = getattr(processor, "tokenizer", None)
        if tokenizer is None:
            raise WeightsUnavailableError(f"the processor of {model_id or 'the model'} has no tokenizer")
        if getattr(processor, "chat_template", None) is None and getattr(tokenizer, "chat_template", None) is None:
            raise WeightsUnavailableError(
                f"{model_id or 'the model'} has no chat template; use a chat/instruct checkpoint"
            )
        tokenizer.padding_side = "right"  # see module docstring
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer
        self._encoder = BatchEncoder(processor, tokenizer)
        self._letter_ids: dict[int, list[list[int]]] = {}
        self._prompts: dict[str, str] = {}
        self.forward_seconds = 0.0  # time inside the model forward (for the benchmark)

    @classmethod
    def from_pretrained(
        cls,
        model_id: str = DEFAULT_VQA_MODEL,
        *,
        trust_remote_code: bool = False,
        revision: str | None = None,
        device: str | torch.device | None = None,
        dtype: torch.dtype | None = None,
        placement: Any = None,
    ) -> VQAScorer:
        """``placement``: a ``conceptforge.placement.Placement`` (``--device-map``): accelerate
        spreads the model over GPUs, CPU and disk and the inputs go to its first device."""
        device = (
            torch.device(check_device(str(device))) if device is not None else default_device()
        )  # before any import
        from transformers import AutoModelForImageTextToText

        dtype = dtype or default_dtype(device)
        _check_remote_code(model_id, trust_remote_code, revision)
        processor = _load_processor(model_id, revision=revision, trust_remote_code=trust_remote_code)
        try:
            model = AutoModelForImageTextToText.from_pretrained(
                model_id,
                revision=revision,
                trust_remote_code=trust_remote_code,
                dtype=dtype,
                **(placement.from_pretrained_kwargs() if placement is not None else {}),
            )
        except ValueError as error:
            raise WeightsUnavailableError(
                f"{model_id} does not load as AutoModelForImageTextToText ({one_line(error)}); "
                "use an image-text-to-text checkpoint in transformers' format"
            ) from None
        if placement is None:
            model.to(device)
        else:
            from conceptforge.placement import input_device

            device = torch.device(input_device(model))
        logger.info("VQA model %s on %s (%s)", model_id, device, str(dtype).replace("torch.", ""))
        return cls(model, processor, model_id=model_id, device=device, dtype=dtype)

    # -- option letters ------------------------------------------------------------------------
    def answer_token_ids(self, answer: str, *, what: str = "answer") -> list[int]:
        """Token ids counted for a one-token answer: the bare word, plus " word" when that is
        one token too (a chat model may start its reply with either).

        Refuses a tokenizer that does not encode ``answer`` as one token that decodes back to it:
        reading the logit of a piece of the answer would silently mis-score.
        """
        name = self.model_id or "the VQA model"
        bare = self.tokenizer.encode(answer, add_special_tokens=False)
        if len(bare) != 1 or self.tokenizer.decode(bare).strip() != answer:
            raise WeightsUnavailableError(
                f"the tokenizer of {name} encodes {what} {answer!r} as {len(bare)} tokens {bare}, not one; "
                f"scoring it from the next-token probabilities needs a single-token {what}, so this model cannot be used"
            )
        variants = [bare[0]]
        spaced = self.tokenizer.encode(" " + answer, add_special_tokens=False)
        if len(spaced) == 1 and spaced[0] != bare[0] and self.tokenizer.decode(spaced).strip() == answer:
            variants.append(spaced[0])
        return variants

    def letter_token_ids(self, num_options: int) -> list[list[int]]:
        """Token ids counted for each option letter (:meth:`answer_token_ids` of A, B, …)."""
        if num_options in self._letter_ids:
            return self._letter_ids[num_options]
        if num_options > len(LETTERS):
            raise InvalidArgumentError(f"{num_options} options exceed the letters A-Z")
        ids: list[list[int]] = []
        owner: dict[int, str] = {}
        name = self.model_id or "the VQA model"
        for letter in LETTERS[:num_options]:
            variants = self.answer_token_ids(letter, what="option letter")
            for token in variants:
                if token in owner:
                    raise WeightsUnavailableError(
                        f"the tokenizer of {name} maps letters {owner[token]!r} and {letter!r} to one token"
                    )
                owner[token] = letter
            ids.append(variants)
        self._letter_ids[num_options] = ids
        return ids

    # -- prompts -------------------------------------------------------------------------------
    def prompt(self, question: MultipleChoiceQuestion) -> str:
        return self.prompt_text(question.text)

    def prompt_text(self, text: str) -> str:
        """The chat prompt of one user turn: the image, then ``text``; the assistant's turn opened."""
        if text not in self._prompts:
            messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
            self._prompts[text] = self.processor.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=False
            )
        return self._prompts[text]

    # -- scoring -------------------------------------------------------------------------------
    def _next_token_logits(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return next_token_logits(self.model, inputs)

    def _encode(
        self,
        images: Sequence[Image.Image],
        texts: Sequence[str],
        *,
        pool: ThreadPoolExecutor | None = None,
        suffix: str = "",
        raw: bool = False,
    ) -> dict[str, torch.Tensor]:
        """The model's inputs for ``images`` with ``texts``: each text in the chat prompt of
        :meth:`prompt_text`, or (``raw``) each text already the whole prompt string (a VQAScore
        variant's own conversation), then ``suffix``."""
        prompts = list(texts) if raw else [self.prompt_text(t) for t in texts]
        inputs = self._encoder(images, [p + suffix for p in prompts], pool=pool)
        out = {}
        for key, value in inputs.items():
            if isinstance(value, torch.Tensor):
                value = value.to(self.device)
                if value.is_floating_point():
                    value = value.to(self.dtype)
                out[key] = value
        return out

    # -- teacher-forced answers ----------------------------------------------------------------
    def answer_suffix(self, answer: str) -> str:
        """What follows the generation prompt when the assistant replies ``answer`` and stops: the
        chat template's own rendering of the reply up to its end-of-turn token, or the reply and
        the tokenizer's end-of-sequence token where the template closes the turn with none (LLaVA-1.5:
        " Yes</s>", as t2v_metrics' conversation template writes it)."""
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "?"}]}]
        prefix = self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        reply = [*messages, {"role": "assistant", "content": [{"type": "text", "text": answer}]}]
        full = self.processor.apply_chat_template(reply, tokenize=False)
        tail = full[len(prefix) :] if full.startswith(prefix) else answer
        at = tail.find(answer)
        if at < 0:
            raise WeightsUnavailableError(
                f"the chat template of {self.model_id or 'the model'} does not write the reply {answer!r}"
            )
        spoken, after = tail[: at + len(answer)], tail[at + len(answer) :]
        for special in sorted(self.tokenizer.all_special_tokens, key=len, reverse=True):
            if special and after.startswith(special):
                return spoken + special
        if self.tokenizer.eos_token is None:
            raise WeightsUnavailableError(
                f"the tokenizer of {self.model_id or 'the model'} has no end-of-sequence token"
            )
        return spoken + self.tokenizer.eos_token

    def answer_token_count(self, prompt: str, suffix: str) -> int:
        """How many tokens ``suffix`` adds after the whole prompt string ``prompt``: those of
        ``prompt + suffix`` past the longest start it shares with ``prompt`` alone. A trailing space
        of the prompt that the answer's first token absorbs (SentencePiece's "▁Yes" after
        "ASSISTANT: ") is then the answer's, as t2v_metrics counts it."""
        alone = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        full = self.tokenizer(prompt + suffix, add_special_tokens=False)["input_ids"]
        shared = 0
        while shared < min(len(alone), len(full)) and alone[shared] == full[shared]:
            shared += 1
        return len(full) - shared

    @torch.inference_mode()
    def answer_log_probs(
        self,
        images: Sequence[Image.Image],
        texts: Sequence[str],
        answer: str,
        *,
        batch_size: int = 8,
        raw_suffix: str | None = None,
    ) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
        """``(start, token_log_probs [B, T], first [B, vocab])`` per batch, teacher-forced: the chat
        prompt of ``images[i]`` with ``texts[i]`` followed by :meth:`answer_suffix` (``T`` tokens),
        each answer token's log-probability given everything before it, and the whole log-distribution
        at the answer's first token (where P("Yes") + P("No") is read).

        ``raw_suffix``: each text is already the whole prompt string (a VQAScore variant's own
        conversation) and ``raw_suffix`` is what is teacher-forced after it; its tokens are those
        :meth:`answer_token_count` finds, the same number for every prompt of a batch."""
        if batch_size < 1:
            raise InvalidArgumentError(f"--batch-size must be >= 1, got {batch_size}")
        raw = raw_suffix is not None
        suffix = raw_suffix if raw else self.answer_suffix(answer)
        count = len(self.tokenizer(suffix, add_special_tokens=False)["input_ids"])
        for start in range(0, len(images), batch_size):
            if raw:
                counts = {self.answer_token_count(t, suffix) for t in dict.fromkeys(texts[start : start + batch_size])}
                if len(counts) != 1:
                    raise WeightsUnavailableError(
                        f"the answer {suffix!r} tokenises differently after different prompts; cannot teacher-force it"
                    )
                (count,) = counts
            inputs = self._encode(
                images[start : start + batch_size], texts[start : start + batch_size], suffix=suffix, raw=raw
            )
            ids, mask = inputs["input_ids"], inputs["attention_mask"]
            last = mask.shape[1] - 1 - mask.flip(1).int().argmax(dim=1)
            targets = last[:, None] - count + 1 + torch.arange(count, device=last.device)[None, :]  # answer positions
            tail = self.tokenizer.decode(ids[0, targets[0]].tolist())
            if tail.replace(" ", "") != suffix.replace(" ", ""):
                raise WeightsUnavailableError(
                    f"the answer {suffix!r} does not tokenise apart from its prompt ({tail!r}); cannot teacher-force it"
                )
            rows = torch.arange(ids.shape[0], device=ids.device)[:, None]
            head = self.model.get_output_embeddings() if hasattr(self.model, "get_output_embeddings") else None
            backbone = getattr(self.model, "model", None)
            if head is not None and backbone is not None:
                logits = head(backbone(**inputs).last_hidden_state[rows, targets - 1]).float()
            else:
                logits = self.model(**inputs).logits[rows, targets - 1].float()
            log_probs = torch.log_softmax(logits.double(), dim=-1)  # float64: ln P near -200 keeps 1e-13
            chosen = log_probs.gather(2, ids[rows, targets][..., None])[..., 0]
            yield start, chosen.cpu(), log_probs[:, 0].cpu()

    def next_token_probabilities(
        self,
        images: Sequence[Image.Image],
        texts: Sequence[str],
        *,
        batch_size: int = 8,
        prefetch: bool = True,
    ) -> Iterator[tuple[int, torch.Tensor]]:
        """``(start, probs)`` per batch: :meth:`next_token_log_probabilities` exponentiated."""
        for start, log_probs in self.next_token_log_probabilities(
            images, texts, batch_size=batch_size, prefetch=prefetch
        ):
            yield start, log_probs.exp()

    def next_token_log_probabilities(
        self,
        images: Sequence[Image.Image],
        texts: Sequence[str],
        *,
        batch_size: int = 8,
        prefetch: bool = True,
        raw: bool = False,
    ) -> Iterator[tuple[int, torch.Tensor]]:
        """``(start, log_probs)`` per batch (``raw``: each text is the whole prompt string, see
        :meth:`_encode`): the next-token log-distribution ([B, vocab], float32,
        CPU; log space so that a token far below float32's smallest probability keeps its ratio to
        the others) after the chat prompt of ``images[i]`` with ``texts[i]``, ``batch_size`` pairs at a time.

        With ``prefetch`` the next batch is preprocessed (image resizing, tokenisation) in a
        background thread while the model runs on the current one, and that thread helps with
        the first batch. Preprocessing reuses token ids and skips the processor's per-image
        NumPy path once it has checked it gives the same tensors (see ``vqa_inputs``).
        """
        if len(images) != len(texts):
            raise ValueError("one text per image")
        if batch_size < 1:
            raise InvalidArgumentError(f"--batch-size must be >= 1, got {batch_size}")
        starts = list(range(0, len(images), batch_size))
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = None

            def encode(start: int, helper: ThreadPoolExecutor | None = None):
                return self._encode(
                    images[start : start + batch_size], texts[start : start + batch_size], pool=helper, raw=raw
                )

            for number, start in enumerate(starts):
                # The first batch has nothing to overlap with: it is encoded here, with the idle
                # prefetch thread resizing half of its images; later ones were prefetched.
                inputs = pending.result() if prefetch and number else encode(start, pool if prefetch else None)
                if number + 1 < len(starts):
                    pending = pool.submit(encode, starts[number + 1]) if prefetch else None
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                begin = time.perf_counter()
                logits = self._next_token_logits(inputs)
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                self.forward_seconds += time.perf_counter() - begin
                yield start, torch.log_softmax(logits, dim=-1).cpu()

    def score(
        self,
        images: Sequence[Image.Image],
        questions: Sequence[MultipleChoiceQuestion],
        *,
        batch_size: int = 8,
        prefetch: bool = True,
    ) -> list[OptionScores]:
        """Option distributions for ``images[i]`` answering ``questions[i]``, ``batch_size`` at a time
        (:meth:`next_token_log_probabilities`, read at the option letters)."""
        if len(images) != len(questions):
            raise ValueError("one question per image")
        index = {}
        for question in {q.text: q for q in questions}.values():
            index[len(question.options)] = self.letter_token_ids(len(question.options))
        results: list[OptionScores] = []
        texts = [q.text for q in questions]
        for start, log_probs in self.next_token_log_probabilities(
            images, texts, batch_size=batch_size, prefetch=prefetch
        ):
            for row, question in enumerate(questions[start : start + batch_size]):
                results.append(option_scores(question.options, log_probs[row], index[len(question.options)]))
        return results


def option_scores(options: Sequence[str], log_probs: torch.Tensor, letters: Sequence[Sequence[int]]) -> OptionScores:
    """The SUB filter's option-letter rule: each option's next-token mass (summed over its letter's
    token variants), normalised over the options in log space (``filters.vqa.allowed``: a float32
    softmax would round letters carrying < 1e-30 of the mass to noise); uniform when the letters
    carry no mass at all."""
    found = allowed_distribution(log_probs, letters)
    return OptionScores(tuple(options), tuple(float(p) for p in found.probs[0]), float(found.mass[0]))
