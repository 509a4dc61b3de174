"""Shared image/text embedding model with an on-disk cache (CLIP, SigLIP, any dual encoder).

Why a cache: every evaluation (SUB's VLM protocol, binding zero-shot and the CDSMs trained on
frozen CLIP image embeddings, CompMap's activations) embeds the same images and prompts again
and again. Embeddings are stored in one SQLite file per (model id, resolved revision, dtype,
modality), keyed by a content hash of the input (text bytes, or the image's encoded bytes /
pixels), so a re-evaluation only runs the encoder on inputs it has never seen.

Any transformers model exposing ``get_text_features`` / ``get_image_features`` works; the
outputs are L2-normalised float32 ``[N, D]`` tensors on the CPU.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from conceptforge.argtypes import check_device
from conceptforge.cards.provenance import COMMIT_RE, local_fingerprint
from conceptforge.errors import DataFormatError, DataNotFoundError, InvalidArgumentError, WeightsUnavailableError
from conceptforge.external_errors import weights_error
from conceptforge.loaders.harness.model_ref import DEFAULT_CLIP
from conceptforge.sqlite_files import connect_wal

logger = logging.getLogger(__name__)

CACHE_ENV = "CONCEPTFORGE_EMBEDDING_CACHE"


def default_cache_dir() -> Path:
    """``$CONCEPTFORGE_EMBEDDING_CACHE`` or ``$XDG_CACHE_HOME/conceptforge/embeddings``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "conceptforge" / "embeddings"


def embedding_revision(model_id: str, revision: str | None) -> str:
    """The immutable revision embeddings are keyed by: a commit hash or a local fingerprint."""
    if os.path.isdir(model_id):
        return local_fingerprint(model_id)
    if revision and COMMIT_RE.fullmatch(revision):
        return revision
    from transformers.utils.hub import cached_file, extract_commit_hash

    try:
        resolved = cached_file(model_id, "config.json", revision=revision)
    except Exception as error:  # noqa: BLE001 - any failure here is reported by the load itself
        logger.debug("could not resolve revision of %s: %s", model_id, error)
        resolved = None
    commit = extract_commit_hash(resolved, None)
    if commit:
        return commit
    # Unresolvable (e.g. an odd cache layout): key by the requested name; still correct for pinned tags.
    return f"ref-{revision or 'main'}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:120] or "model"


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def image_key(image: Any) -> str:
    """Content hash of an image given as PIL image, path, bytes or a datasets ``{"bytes", "path"}`` dict.

    Encoded bytes are hashed as they are (cheap, no decoding); a decoded PIL image by mode, size
    and pixels, so the same picture loaded twice maps to the same key.
    """
    if isinstance(image, dict):
        if image.get("bytes"):
            image = image["bytes"]
        elif image.get("path"):
            image = image["path"]
        else:
            raise DataFormatError("an image entry has neither bytes nor a path")
    if isinstance(image, (bytes, bytearray, memoryview)):
        return "b" + hashlib.sha256(bytes(image)).hexdigest()
    if isinstance(image, (str, os.PathLike)):
        try:
            return "b" + hashlib.sha256(Path(image).read_bytes()).hexdigest()
        except OSError as error:
            raise DataNotFoundError(f"cannot read image {image}: {error.strerror or error}") from None
    if hasattr(image, "tobytes") and hasattr(image, "mode"):
        digest = hashlib.sha256(f"{image.mode}:{image.size}".encode())
        digest.update(image.tobytes())
        return "p" + digest.hexdigest()
    raise InvalidArgumentError(f"unsupported image type {type(image).__name__}")


def load_pil(image: Any):
    """Decode any accepted image form to an RGB PIL image."""
    from PIL import Image

    if isinstance(image, dict):
        image = image.get("bytes") or image.get("path")
    if isinstance(image, (bytes, bytearray, memoryview)):
        image = Image.open(io.BytesIO(bytes(image)))
    elif isinstance(image, (str, os.PathLike)):
        image = Image.open(image)
    return image.convert("RGB")


def pil_processor(model_id: str, *, revision: str | None = None) -> Any:
    """``AutoProcessor`` with its PIL image processor, whether or not torchvision is installed
    (transformers picks a torchvision one when it can, whose resizing differs by ~1e-2): the same
    model gives the same vectors everywhere, so cached embeddings never mix the two."""
    from transformers import AutoProcessor

    try:
        return AutoProcessor.from_pretrained(model_id, revision=revision, backend="pil")
    except TypeError:  # older transformers: no backend argument
        return AutoProcessor.from_pretrained(model_id, revision=revision)


class EmbeddingCache:
    """A key -> vector store in one SQLite file (safe to share between processes).

    Vectors are float32 (embeddings) unless ``dtype`` says otherwise: a VLM's log-probabilities
    are float64 (a probability of 1e-88 is 0.0 in float32, and every caption would tie). One file
    holds one dtype, named by its caller (``vlm-scores/…/*-log64.sqlite``)."""

    def __init__(self, path: Path, *, flag: str = "--cache-dir", dtype: type = np.float32) -> None:
        from conceptforge.output import claim_sqlite

        self.dtype = np.dtype(dtype)

        self.path = path = claim_sqlite(path, tables=["emb"], flag=flag, what="embedding cache")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = connect_wal(path, check_same_thread=False)
        self._conn.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        self._conn.commit()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, blob in self._conn.execute(f"SELECT key, vec FROM emb WHERE key IN ({marks})", chunk):
                    found[key] = np.frombuffer(blob, dtype=self.dtype)
        return found

    def put_many(self, items: Iterable[tuple[str, np.ndarray]]) -> None:
        rows = [(key, np.ascontiguousarray(vec, dtype=self.dtype).tobytes()) for key, vec in items]
        with self._lock:
            self._conn.executemany("INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)", rows)
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _features(output: Any) -> torch.Tensor:
    """``get_*_features`` returns a tensor (transformers 4) or an output with ``pooler_output`` (5)."""
    if isinstance(output, torch.Tensor):
        return output
    for name in ("pooler_output", "text_embeds", "image_embeds"):
        value = getattr(output, name, None)
        if isinstance(value, torch.Tensor):
            return value
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0]
    raise WeightsUnavailableError(f"cannot read embeddings from a {type(output).__name__}")


def logit_scale_and_bias(model: Any) -> tuple[float, float]:
    """A dual encoder's similarity scale (exp of its learned log-scale; 100 when it has none) and
    bias (SigLIP's; 0 otherwise), the same for transformers and open_clip models."""
    scale = getattr(model, "logit_scale", None)
    bias = getattr(model, "logit_bias", None)
    return (
        float(scale.detach().float().exp().item()) if isinstance(scale, torch.Tensor) else 100.0,
        float(bias.detach().float().item()) if isinstance(bias, torch.Tensor) else 0.0,
    )


class EmbeddingModel:
    """A frozen dual encoder plus its processor, with cached ``embed_texts`` / ``embed_images``.

    Attributes: ``model`` and ``processor`` (the transformers objects, usable directly, e.g. by
    CSP which runs the text encoder with learned token embeddings), ``model_id``, ``revision``
    (the resolved commit or local fingerprint), ``logit_scale`` (exp of the learned temperature,
    100 for OpenAI CLIP), ``logit_bias`` (SigLIP; 0 otherwise), ``device`` and ``dtype``.
    """

    def __init__(
        self,
        model: Any,
        processor: Any,
        *,
        model_id: str,
        revision: str,
        cache_dir: str | os.PathLike | None = None,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        for name in ("get_text_features", "get_image_features"):
            if not callable(getattr(model, name, None)):
                raise WeightsUnavailableError(f"model {model_id} has no {name}: use a CLIP/SigLIP-style dual encoder")
        self._set_model(model, model_id=model_id, revision=revision, cache_dir=cache_dir, device=device, dtype=dtype)
        self.processor = processor
        model_type = str(getattr(getattr(model, "config", None), "model_type", ""))
        # SigLIP was trained on texts padded to max_length; CLIP on dynamic padding.
        self._text_padding: str | bool = "max_length" if "siglip" in model_type else True

    def _set_model(
        self,
        model: Any,
        *,
        model_id: str,
        revision: str,
        cache_dir: str | os.PathLike | None,
        device: str | torch.device,
        dtype: torch.dtype,
    ) -> None:
        """The attributes every embedder has (model in eval mode, identity, device, cache, logit
        scale/bias): one place, so an embedder that is not a transformers dual encoder (open_clip)
        cannot miss one."""
        self.model = model.eval()
        self.model_id = model_id
        self.revision = revision
        self.device = torch.device(device)
        self.dtype = dtype
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.logit_scale, self.logit_bias = logit_scale_and_bias(model)
        self._caches: dict[str, EmbeddingCache] = {}

    # ----------------------------------------------------------------------------- loading
    @classmethod
    def from_pretrained(
        cls,
        model_id: str = DEFAULT_CLIP,
        *,
        revision: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        device: str | torch.device | None = None,
        dtype: torch.dtype | str | None = None,
        placement: Any = None,
    ) -> EmbeddingModel:
        """Load a Hub id (at ``revision``) or a local directory; ``cache_dir`` holds the embedding cache.
        ``placement``: ``--device-map`` (conceptforge/placement.py); inputs go to its first device."""
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        check_device(str(device))  # a missing GPU is one line, not a torch traceback at .to(device)
        from transformers import AutoModel

        if isinstance(dtype, str):
            dtype = getattr(torch, dtype)
        dtype = dtype or torch.float32
        try:
            model = AutoModel.from_pretrained(
                model_id,
                revision=revision,
                dtype=dtype,
                **(placement.from_pretrained_kwargs() if placement is not None else {}),
            )
            processor = pil_processor(model_id, revision=revision)
        except (OSError, ValueError, KeyError) as error:
            raise weights_error("embedding model", model_id, error) from None
        resolved = embedding_revision(model_id, revision)
        logger.info("embedding model %s @ %s on %s (%s)", model_id, resolved, device, dtype)
        if placement is not None:
            from conceptforge.placement import input_device

            device = input_device(model)
        return cls(
            model.to(device) if placement is None else model,
            processor,
            model_id=model_id,
            revision=resolved,
            cache_dir=cache_dir,
            device=device,
            dtype=dtype,
        )

    # ----------------------------------------------------------------------------- cache
    @property
    def cache_namespace(self) -> Path:
        dtype_name = str(self.dtype).replace("torch.", "")
        return self.cache_dir / _slug(self.model_id) / _slug(self.revision) / dtype_name

    def _cache(self, kind: str) -> EmbeddingCache:
        if kind not in self._caches:
            self._caches[kind] = EmbeddingCache(self.cache_namespace / f"{kind}.sqlite")
        return self._caches[kind]

    def _cached(self, kind: str, keys: list[str], compute, items: list, batch_size: int) -> torch.Tensor:
        cache = self._cache(kind)
        found = cache.get_many(keys)
        missing: dict[str, Any] = {}
        for key, item in zip(keys, items):
            if key not in found and key not in missing:
                missing[key] = item
        if missing:
            from conceptforge.progress import tqdm

            miss_keys = list(missing)
            batches = range(0, len(miss_keys), batch_size)
            for start in tqdm(batches, desc=f"embed {kind}", leave=False):
                chunk = miss_keys[start : start + batch_size]
                with torch.inference_mode():
                    vectors = compute([missing[key] for key in chunk])
                vectors = torch.nn.functional.normalize(vectors.float(), dim=-1).cpu().numpy()
                cache.put_many(zip(chunk, vectors))
                found.update(zip(chunk, vectors))
            logger.debug("%s: %d cached, %d computed", kind, len(keys) - len(missing), len(missing))
        if not keys:
            return torch.zeros((0, self.embedding_dim), dtype=torch.float32)
        return torch.from_numpy(np.stack([found[key] for key in keys]).astype(np.float32, copy=True))

    @property
    def embedding_dim(self) -> int:
        config = getattr(self.model, "config", None)
        for name in ("projection_dim",):
            if getattr(config, name, None):
                return int(getattr(config, name))
        text_config = getattr(config, "text_config", None)
        return int(getattr(text_config, "hidden_size", 0) or 0)

    # ----------------------------------------------------------------------------- encoders
    def encode_texts_uncached(self, texts: list[str]) -> torch.Tensor:
        """Unnormalised text features, no cache (for callers that need gradients, use the model)."""
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        inputs = tokenizer(list(texts), padding=self._text_padding, truncation=True, return_tensors="pt")
        inputs = {
            k: v.to(self.device) for k, v in inputs.items() if k in ("input_ids", "attention_mask", "position_ids")
        }
        if self._text_padding == "max_length":
            inputs.pop("attention_mask", None)  # SigLIP's text tower ignores padding masks
        return _features(self.model.get_text_features(**inputs))

    def encode_images_uncached(self, images: list[Any]) -> torch.Tensor:
        image_processor = getattr(self.processor, "image_processor", self.processor)
        pixel_values = image_processor(images=[load_pil(image) for image in images], return_tensors="pt")[
            "pixel_values"
        ]
        return _features(self.model.get_image_features(pixel_values=pixel_values.to(self.device, self.dtype)))

    def embed_texts(self, texts: Sequence[str], *, batch_size: int = 64) -> torch.Tensor:
        """L2-normalised ``[N, D]`` float32 CPU embeddings of ``texts`` (cached by content)."""
        texts = [str(text) for text in texts]
        return self._cached("text", [text_key(t) for t in texts], self.encode_texts_uncached, texts, batch_size)

    def embed_images(self, images: Sequence[Any], *, batch_size: int = 32) -> torch.Tensor:
        """L2-normalised ``[N, D]`` float32 CPU embeddings of ``images`` (PIL, paths, bytes or
        datasets ``{"bytes", "path"}`` dicts; cached by content)."""
        images = list(images)
        return self._cached("image", [image_key(i) for i in images], self.encode_images_uncached, images, batch_size)

    def similarity_logits(self, image_embeddings: torch.Tensor, text_embeddings: torch.Tensor) -> torch.Tensor:
        """``logit_scale · cos + logit_bias``, the model's own image–text logits."""
        return self.logit_scale * image_embeddings @ text_embeddings.T + self.logit_bias

    def close(self) -> None:
        for cache in self._caches.values():
            cache.close()
        self._caches.clear()
