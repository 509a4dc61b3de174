"""A served model (OpenAI chat-completions API): ``match`` and ``choose`` from token
log-probabilities, ``answer-text`` from its words.

The questions are the local generative VLM's (``adapters/generative_vlm.py``), asked the same
way — one user turn, the image then the text, the server's chat template opening the assistant's
turn — and read by the same allowed-answer math in log space (``filters.vqa.allowed``), so a
served copy of a model gives the local adapter's numbers when the server runs the same forward
(a test checks it on a tiny LLaVA); not for a prefix-LM that a server runs causally (PaliGemma
under vLLM 0.32: 8–16% apart; docs/evaluation-served.md, "When a served copy gives the local numbers"):

* ``match`` is VQAScore's ``next-token`` variant (ours): P("Yes") [+ P(" Yes")] as the first
  answer token after ``Does this figure show "{text}"? Please answer yes or no.``. The
  teacher-forced t2v_metrics variants need the probability of a whole answer, which a chat
  endpoint does not return, so a served model always runs this variant (the result says so).
* ``choose`` is the SUB filter's option-letter rule: each option's letter probability as the
  first answer token, normalised over the options.
* Beside each number, the share of the next-token probability the allowed answers carried
  (``allowed_mass``), as the local adapter records it.

Where the probabilities come from (the model's ``probabilities``, found once per server by
``endpoint_model.probability_mode``): ``token-ids`` — the exact log-probabilities of the allowed
answers' token ids (vLLM's ``logprob_token_ids``, ids from the served model's tokenizer, the
same one-token rules as the local scorer); ``top-logprobs`` — the top 20 alternatives, matched by
token text ("Yes" or " Yes"); an allowed answer outside the top 20 counts as no mass, so its
probability and ``allowed_mass`` are lower bounds there (a sample with no allowed answer in the
top 20 has ``allowed_mass`` 0 and the tasks score it wrong, ``allowed_tokens.no_allowed_mass``). Every request is temperature 0, seed 0,
one token, through the client's cache (``endpoint_client``): a rerun sends nothing again.
"""

from __future__ import annotations

import base64
import io
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from conceptforge.errors import EndpointResponseError, InvalidArgumentError
from conceptforge.loaders.harness.endpoint_model import TOKEN_ID_PREFIX, returned_token_ids

logger = logging.getLogger(__name__)


def image_url(image: Any) -> str:
    """``data:image/png;base64,…`` of any accepted image form (PNG: the server decodes the same pixels)."""
    from conceptforge.loaders.harness.embeddings import load_pil

    buffer = io.BytesIO()
    load_pil(image).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _urls(images: Sequence[Any]) -> dict[int, str]:
    """Each distinct image object's data URL, encoded once however many prompts it has."""
    urls: dict[int, str] = {}
    for image in images:
        if id(image) not in urls:
            urls[id(image)] = image_url(image)
    return urls


def user_turn(url: str, text: str) -> dict[str, Any]:
    """The one user message the local adapter's chat prompt holds: the image, then the text."""
    return {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": text}],
    }


def _text(token: str) -> str:
    """A returned token's text with the tokenizers' space markers read as spaces."""
    return token.replace("\u2581", " ").replace("\u0120", " ")


def returned_token_texts(entry: dict[str, Any]) -> dict[str, float]:
    """``{token text: log-probability}`` of a response position (chosen token and alternatives)."""
    out: dict[str, float] = {}
    for item in [*(entry.get("top_logprobs") or []), entry]:
        if item.get("logprob") is not None:
            out.setdefault(_text(str(item.get("token", ""))), float(item["logprob"]))
    return out


def _logsumexp(values: list[float]) -> float:
    if not values:
        return float("-inf")
    top = max(values)
    if top == float("-inf"):
        return top
    return top + float(np.log(sum(np.exp(v - top) for v in values)))


class _TokenRules:
    """The local scorer's one-token answer rules (``VQAScorer.answer_token_ids`` / ``letter_token_ids``,
    the same methods, not copies) on the served model's tokenizer."""

    from conceptforge.filters.vqa.scorer import VQAScorer as _Scorer

    answer_token_ids = _Scorer.answer_token_ids
    letter_token_ids = _Scorer.letter_token_ids

    def __init__(self, tokenizer: Any, model_id: str) -> None:
        self.tokenizer, self.model_id = tokenizer, model_id
        self._letter_ids: dict[int, list[list[int]]] = {}


class EndpointAdapter:
    """``match`` (VQAScore next-token), ``choose`` (option letters), ``answer`` (yes/no) and
    ``answer_text`` of a served model, every request through one :class:`EndpointClient`."""

    family = "endpoint"
    kind = "endpoint"  # CompMap's activation key and progress label
    score_scale = "log-probability"  # match scores are the server's ln P(Yes), float64, as the local adapter's

    def __init__(self, model: Any, client: Any, tokenizer: Any | None) -> None:
        from conceptforge.loaders.harness.adapters.vqascore import NEXT_TOKEN, vqascore_variant
        from conceptforge.loaders.harness.endpoint_model import TOKEN_IDS, TOP_K

        self.model = model
        self.client = client
        self.model_id = model.id
        self.revision = model.sha
        self.mode = model.endpoint["probabilities"]
        self.vqascore = vqascore_variant(NEXT_TOKEN, model_type=None)
        source = (
            "exact log-probabilities of the answer token ids (logprob_token_ids)"
            if self.mode == TOKEN_IDS
            else f"the top-{TOP_K} log-probabilities (top_logprobs)"
        )
        self.protocol = f"{self.vqascore.describe()}; served, from {source}"
        self.rules = _TokenRules(tokenizer, model.id) if tokenizer is not None and self.mode == TOKEN_IDS else None
        self.tag: str | None = None  # the task the requests are counted under (usage per task)

    # ----------------------------------------------------------------------------- requests
    def _need_probabilities(self, what: str) -> None:
        from conceptforge.loaders.harness.endpoint_model import NO_LOGPROBS

        if self.mode == NO_LOGPROBS:
            raise InvalidArgumentError(
                f"{self.model_id} returns no token log-probabilities, so it cannot {what}; "
                "score it with the by-answer protocols"
            )

    def _first_positions(self, images: Sequence[Any], prompts: Sequence[str], groups: list[list[Any]]) -> list[dict]:
        """The first answer position (chosen token + alternatives) of each (image, prompt)."""
        from conceptforge.loaders.harness.endpoint_client import ChatRequest
        from conceptforge.loaders.harness.endpoint_model import TOKEN_IDS, TOP_K

        urls = _urls(images)
        requests = []
        for image, prompt in zip(images, prompts):
            url = urls[id(image)]
            if self.mode == TOKEN_IDS:
                ids = tuple(dict.fromkeys(int(t) for group in groups for t in group))
                extra = (("logprob_token_ids", ids), ("return_tokens_as_token_ids", True))
                requests.append(ChatRequest((user_turn(url, prompt),), logprobs=True, extra_body=extra))
            else:
                requests.append(ChatRequest((user_turn(url, prompt),), logprobs=True, top_logprobs=TOP_K))
        responses = self.client.complete(requests, desc=f"{self.model_id}", tag=self.tag)
        out = []
        for response in responses:
            content = (response["choices"][0].get("logprobs") or {}).get("content") or []
            if not content:
                raise EndpointResponseError(
                    f"the endpoint {self.model.endpoint['base_url']} answered without log-probabilities "
                    "although it gave them when the run started"
                )
            out.append(content[0])
        return out

    def _groups(self, answers: Sequence[str], what: str) -> list[list[Any]]:
        """Per allowed answer, what counts for it: token ids (``token-ids``) or token texts."""
        if self.rules is not None:
            return [self.rules.answer_token_ids(answer, what=what) for answer in answers]
        return [[answer, " " + answer] for answer in answers]

    def _group_logs(self, entry: dict[str, Any], groups: list[list[Any]]) -> tuple[list[float], float, Any]:
        """(each group's log-probability, the chosen token's log-probability, the chosen token)."""
        if self.rules is not None:
            found = returned_token_ids(entry)
            missing = [t for group in groups for t in group if t not in found]
            if missing:
                raise EndpointResponseError(
                    f"the endpoint {self.model.endpoint['base_url']} did not return the log-probabilities of "
                    f"token ids {missing[:5]} asked for with logprob_token_ids"
                )
            chosen = str(entry.get("token", ""))
            chosen_id = int(chosen[len(TOKEN_ID_PREFIX) :]) if chosen.startswith(TOKEN_ID_PREFIX) else None
            return [_logsumexp([found[t] for t in group]) for group in groups], float(entry["logprob"]), chosen_id
        texts = returned_token_texts(entry)
        logs = [_logsumexp([texts[t] for t in dict.fromkeys(group) if t in texts]) for group in groups]
        return logs, float(entry["logprob"]), _text(str(entry.get("token", "")))

    def answer(self, images: Sequence[Any], questions: Sequence[str], *, batch_size: int = 8) -> np.ndarray:
        """[N, 4] per (image, yes/no question), as the local adapter's: P("Yes"), the top
        next-token probability (the greedy token's), whether it is "Yes", P("Yes") + P("No")."""
        values = self._answer_logs(images, questions)
        values[:, :2] = np.exp(values[:, :2])
        return values

    def _answer_logs(self, images: Sequence[Any], questions: Sequence[str]) -> np.ndarray:
        """:meth:`answer` with ln P("Yes") and ln P(top) as the server returned them (float64)."""
        from conceptforge.filters.vqa.allowed import normalise_allowed

        self._need_probabilities("match")
        if len(images) != len(questions):
            raise ValueError("one question per image")
        groups = self._groups(["Yes", "No"], "answer")
        rows = []
        for entry in self._first_positions(images, questions, groups):
            logs, top, chosen = self._group_logs(entry, groups)
            mass = normalise_allowed(np.array([logs])).mass[0]
            rows.append([float(logs[0]), float(top), float(chosen in groups[0]), float(mass)])
        return np.asarray(rows, dtype=np.float64).reshape(-1, 4)

    # ----------------------------------------------------------------------------- capabilities
    def _pairs(self, images: Sequence[Any], texts: Sequence[Sequence[str]], batch_size: int) -> np.ndarray:
        flat_images = [image for image, row in zip(images, texts) for _ in row]
        flat = [self.vqascore.question.format(text=text) for row in texts for text in row]
        if not flat:
            return np.zeros((0, 4))
        return self._answer_logs(flat_images, flat)

    def match(self, images: Sequence[Any], texts: Sequence[Sequence[str]], *, batch_size: int = 8) -> list[list[float]]:
        """ln VQAScore (next-token, float64) of each image with each of its texts."""
        from conceptforge.loaders.harness.adapters.generative_vlm import _per_row

        return _per_row(self._pairs(images, texts, batch_size)[:, 0], texts)

    def match_allowed_mass(
        self, images: Sequence[Any], texts: Sequence[Sequence[str]], *, batch_size: int = 8
    ) -> list[list[float]]:
        """P("Yes") + P("No") of each pair :meth:`match` scored (its responses are cached)."""
        from conceptforge.loaders.harness.adapters.generative_vlm import _per_row

        return _per_row(self._pairs(images, texts, batch_size)[:, 3], texts)

    def choose(self, images: Sequence[Any], questions: Sequence[Any], *, batch_size: int = 8) -> list[Any]:
        """The option distribution of each image's multiple-choice question (letters A, B, …)."""
        from conceptforge.filters.vqa.allowed import normalise_allowed
        from conceptforge.filters.vqa.questions import LETTERS
        from conceptforge.filters.vqa.scorer import OptionScores

        self._need_probabilities("choose")
        if len(images) != len(questions):
            raise ValueError("one question per image")
        width = max((len(q.options) for q in questions), default=0)
        if self.rules is not None:
            letters = self.rules.letter_token_ids(width) if width else []
        else:
            letters = self._groups(LETTERS[:width], "option letter")
        out = []
        entries = self._first_positions(images, [q.text for q in questions], letters)
        for question, entry in zip(questions, entries):
            groups = letters[: len(question.options)]
            logs, _, _ = self._group_logs(entry, groups)
            found = normalise_allowed(np.array([logs]))
            out.append(
                OptionScores(tuple(question.options), tuple(float(p) for p in found.probs[0]), float(found.mass[0]))
            )
        return out

    # the SUB filter's scorer interface (filters.vqa.scorer.VQAScorer: letter_token_ids, score)
    def letter_token_ids(self, num_options: int) -> list[list[Any]]:
        """What counts for each option letter (refuses a tokenizer that splits a letter, as the local scorer)."""
        from conceptforge.filters.vqa.questions import LETTERS

        self._need_probabilities("choose")
        if self.rules is not None:
            return self.rules.letter_token_ids(num_options)
        return self._groups(LETTERS[:num_options], "option letter")

    def score(self, images: Sequence[Any], questions: Sequence[Any], *, batch_size: int = 8, **_: Any) -> list[Any]:
        return self.choose(images, questions, batch_size=batch_size)

    def answer_text(
        self, images: Sequence[Any], prompts: Sequence[str], *, max_new_tokens: int = 16, batch_size: int = 8
    ) -> list[str]:
        """The served model's own words (temperature 0, seed 0) for each (image, prompt): the text
        of the first choice, surrounding whitespace stripped (as the local adapter's)."""
        from conceptforge.loaders.harness.endpoint_client import ChatRequest

        if len(images) != len(prompts):
            raise ValueError("one prompt per image")
        urls = _urls(images)
        requests = [
            ChatRequest((user_turn(urls[id(image)], prompt),), max_tokens=max_new_tokens)
            for image, prompt in zip(images, prompts)
        ]
        responses = self.client.complete(requests, desc=f"{self.model_id} answers", tag=self.tag)
        return [str(r["choices"][0]["message"].get("content") or "").strip() for r in responses]

    def score_image(self, image: Any, texts: list[str], *, batch_size: int = 8):
        """CompMap activations of one image: the log-odds of its VQAScore with each text (as the local adapter)."""
        from conceptforge.loaders.harness.adapters.generative_vlm import log_odds

        return log_odds(self.match([image], [texts], batch_size=batch_size)[0])

    def close(self) -> None:
        usage = self.client.usage
        logger.info(
            "endpoint %s: %d requests sent (%d retries), %d from the cache, %d prompt + %d completion tokens",
            self.model_id,
            usage.requests,
            usage.retries,
            usage.cache_hits,
            usage.prompt_tokens,
            usage.completion_tokens,
        )
        self.client.close()


def load(model: Any, *, device: str | None, dtype: str | None, cache_dir: str | None) -> EndpointAdapter:
    """The adapter of a resolved served model (``device``/``dtype`` do not apply: the server's)."""
    from pathlib import Path

    from conceptforge.loaders.harness.embeddings import default_cache_dir
    from conceptforge.loaders.harness.endpoint_client import EndpointClient
    from conceptforge.loaders.harness.endpoint_model import (
        EndpointOptions,
        load_tokenizer,
        parse_endpoint_spec,
        settings_of,
    )

    spec = parse_endpoint_spec(model.id)
    client_settings = model.endpoint["client"]
    options = EndpointOptions(
        concurrency=client_settings["max_concurrency"],
        timeout_s=client_settings["timeout_s"],
        max_requests=client_settings["max_requests"],
        retries=client_settings["max_retries"],
    )
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    client = EndpointClient(settings_of(spec, options), cache_dir=root / "endpoint")
    tokenizer = (
        load_tokenizer(model.endpoint["identity"], spec.model)
        if model.endpoint["probabilities"] == "token-ids"
        else None
    )
    return EndpointAdapter(model, client, tokenizer)
