"""Capabilities, model families and the detection of a model's family from its own files.

Why capabilities and not families: a benchmark's protocol needs something a model can *do* —
image and text vectors (``embed``), a score for an (image, text) pair (``match``), a probability
over a list of options for an image and a question (``choose``), concept-bottleneck attribute
logits (``concepts``), images from prompts (``generate``) — and several families can do each.
A task lists the capabilities it can run with, in the order it prefers them; it runs with every
model whose family's adapter provides one, and each result names the protocol and the adapter
that produced it.

A family is read from the model's files, never its name: ``open_clip_config.json`` (open_clip),
``model_index.json`` (diffusers), ``config.json``'s ``model_type`` and ``architectures``
(transformers dual encoders, image-text-matching heads, generative VLMs), a Python factory
``package.module:function`` (CBMs) or a dataset's columns (ConceptBed's generated images).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from conceptforge.errors import DataFormatError

EMBED = "embed"
MATCH = "match"
CHOOSE = "choose"
CONCEPTS = "concepts"
GENERATE = "generate"
ANSWER_TEXT = "answer-text"  # free-text answers: the by-answer protocols (no probabilities needed)
#: The by-answer protocols: the model answers in words and a documented parser maps the answer to
#: an option (choose) or to yes/no (match); never mixed with the probability protocols on a board.
CHOOSE_BY_ANSWER = "choose-by-answer"
MATCH_BY_ANSWER = "match-by-answer"
IMAGES_TO_JUDGE = "images"  # not a model: a dataset of images a concept learner generated (ConceptBed)
CAPABILITIES = {
    EMBED: "image and text vectors (cosine similarity)",
    MATCH: "a score for an (image, text) pair",
    CHOOSE: "a probability over options for an image and a question",
    CONCEPTS: "concept-bottleneck attribute logits",
    GENERATE: "images from prompts",
    ANSWER_TEXT: "a free-text answer to an image and a prompt (parsed by the by-answer protocols)",
    IMAGES_TO_JUDGE: "generated images to be judged (a dataset, not a model)",
}

# Family ids are what ModelRef.kind holds (the first five were the model kinds before adapters).
HF_DUAL = "clip"
OPEN_CLIP = "open_clip"
ITM = "itm"
VLM = "vlm"
CBM = "cbm"
DIFFUSERS = "diffusers"
GENERATED = "generated-images"

DUAL_TYPES = ("clip", "siglip", "siglip2", "chinese_clip", "altclip", "metaclip_2")
ITM_TYPES = ("vilt", "blip")
RETRIEVAL_ARCHITECTURES = ("ForImageTextRetrieval", "ForImageAndTextRetrieval", "ForQuestionAnswering")


@dataclass(frozen=True)
class Family:
    """A model family: its id (``ModelRef.kind``), what it is, which capabilities its adapter
    provides, the module that implements them and the pip extra it needs (``None``: core)."""

    name: str
    title: str
    capabilities: tuple[str, ...]
    module: str | None  # adapter module under loaders/harness/adapters (None: nothing to load)
    extra: str | None = None


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(HF_DUAL, "transformers dual encoder (CLIP, SigLIP, ...)", (EMBED, MATCH), "hf_dual"),
        Family(OPEN_CLIP, "open_clip dual encoder (EVA-CLIP, OpenCLIP, ...)", (EMBED, MATCH), "open_clip", "open_clip"),
        Family(ITM, "image-text matching head (ViLT, BLIP ITM)", (MATCH,), "itm"),
        Family(
            VLM,
            "generative VLM with a chat template (LLaVA, Qwen-VL, InternVL, ...)",
            (MATCH, CHOOSE, ANSWER_TEXT),
            "generative_vlm",
        ),
        Family(CBM, "concept-bottleneck model, a factory package.module:function", (CONCEPTS,), "cbm"),
        Family(DIFFUSERS, "diffusers pipeline", (GENERATE,), "diffusers"),
        Family(GENERATED, "ConceptBed generated images (a dataset)", (IMAGES_TO_JUDGE,), None),
    )
}


def family(name: str) -> Family:
    return FAMILIES[name]


def provides(kind: str, capability: str) -> bool:
    return kind in FAMILIES and capability in FAMILIES[kind].capabilities


def families_providing(capability: str) -> list[Family]:
    return [f for f in FAMILIES.values() if capability in f.capabilities]


def first_capability(kind: str, wanted: Sequence[str]) -> str | None:
    """The first of ``wanted`` (a task's capabilities, preferred first) that ``kind`` provides."""
    return next((c for c in wanted if provides(kind, c)), None)


def _generative_types() -> set[str]:
    try:
        from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    except ImportError:  # pragma: no cover - transformers is a core dependency
        return set()
    return set(MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES)


def family_of_config(config: dict[str, Any]) -> str:
    """The family of a transformers ``config.json``: dual encoder, ITM head or generative VLM."""
    model_type = config.get("model_type")
    architectures = [str(a) for a in config.get("architectures") or []]
    if model_type in DUAL_TYPES:
        return HF_DUAL
    if any(a.endswith(RETRIEVAL_ARCHITECTURES) for a in architectures):
        return ITM
    if model_type in _generative_types() and (
        not architectures or any(a.endswith(("ForConditionalGeneration", "ForImageTextToText")) for a in architectures)
    ):
        return VLM
    if model_type in ITM_TYPES:
        return ITM
    raise DataFormatError(
        f"no adapter for a {model_type!r} model ({', '.join(architectures) or 'no architectures'}); "
        f"supported: {'; '.join(f.title for f in FAMILIES.values())}"
    )


def family_of_files(files: dict[str, Any]) -> tuple[str, str | None]:
    """(family, model_type) from a model's files ``{name: parsed json}``."""
    if "open_clip_config.json" in files:
        return OPEN_CLIP, None
    if "model_index.json" in files:
        return DIFFUSERS, None
    config = files.get("config.json")
    if isinstance(config, dict):
        return family_of_config(config), config.get("model_type")
    raise DataFormatError(
        "cannot tell what kind of model this is: no config.json, open_clip_config.json or model_index.json"
    )


def load_revision(model: Any) -> str | None:
    """What to pass to ``from_pretrained`` for a ``ModelRef``: the resolved commit on the Hub (so
    the weights are the ones the results name), the requested revision otherwise."""
    return model.sha if model.source == "hub" else model.revision


def load_adapter(model: Any, *, device: str | None, dtype: str | None, cache_dir: str | None) -> Any:
    """The adapter of ``model``'s family, loaded (the family's module is imported only now)."""
    import importlib

    chosen = FAMILIES.get(model.kind)
    if chosen is None or chosen.module is None:
        raise DataFormatError(f"{model.id} is a {model.kind}: there is no model to load")
    module = importlib.import_module(f"{__package__}.{chosen.module}")
    return module.load(model, device=device, dtype=dtype, cache_dir=cache_dir)


#: The files read to tell a model's family, in the order they decide it.
FAMILY_FILES = ("open_clip_config.json", "model_index.json", "config.json")


# ----------------------------------------------------------------------------------- protocols
@runtime_checkable
class Embedder(Protocol):
    """``embed``: L2-normalised float32 [N, D] CPU vectors, cached by content."""

    model_id: str
    revision: str
    logit_scale: float
    logit_bias: float

    def embed_texts(self, texts: Sequence[str], *, batch_size: int = 64) -> Any: ...

    def embed_images(self, images: Sequence[Any], *, batch_size: int = 32) -> Any: ...


@runtime_checkable
class Matcher(Protocol):
    """``match``: one score per (image, text); ``texts[i]`` are the texts image ``i`` is matched with."""

    model_id: str
    revision: str
    protocol: str  # how a score is made, e.g. "ITM log-odds" or "VQAScore P(Yes)"

    def match(
        self, images: Sequence[Any], texts: Sequence[Sequence[str]], *, batch_size: int = 32
    ) -> list[list[float]]: ...


@runtime_checkable
class Chooser(Protocol):
    """``choose``: for each image, a probability over its question's options."""

    model_id: str
    revision: str

    def choose(self, images: Sequence[Any], questions: Sequence[Any], *, batch_size: int = 8) -> list[Any]: ...


@runtime_checkable
class TextAnswerer(Protocol):
    """``answer-text``: the model's own words for each (image, prompt), decoded greedily.

    The by-answer protocols (``choose-by-answer``, ``match-by-answer``) parse these answers, so a
    model without token probabilities (a hosted API, a server that refuses ``logprobs``) can
    still be scored, the way lmms-eval and VLMEvalKit score multiple choice.
    """

    model_id: str
    revision: str

    def answer_text(
        self, images: Sequence[Any], prompts: Sequence[str], *, max_new_tokens: int = 16, batch_size: int = 8
    ) -> list[str]: ...


@runtime_checkable
class ConceptPredictor(Protocol):
    """``concepts``: [B, C] attribute logits (or probabilities) for a list of PIL images."""

    def __call__(self, images: list[Any]) -> Any: ...


@runtime_checkable
class ImageGenerator(Protocol):
    """``generate``: images from prompts, seeded."""

    model_id: str

    def generate(self, prompts: Sequence[str], *, seed: int, steps: int | None = None) -> list[Any]: ...
