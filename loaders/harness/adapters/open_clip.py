"""open_clip dual encoders (EVA-CLIP, OpenCLIP, most CLIP research checkpoints): ``embed``, ``match``.

A model folder or Hub repo holding ``open_clip_config.json`` (what open_clip's ``hf-hub:`` ids
point at) is built by open_clip from that config and its weights; a Hub repo is first fetched at
the resolved commit (open_clip's own ``hf-hub:`` loader takes no revision), so the weights are the
ones the results name. The encoders are wrapped as an
:class:`~conceptforge.loaders.harness.embeddings.EmbeddingModel`, so every task that embeds (SUB, binding
zero-shot and CDSMs, CompMap) shares the same on-disk embedding cache with them. open_clip and
torchvision are the ``open_clip`` extra.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from conceptforge.errors import DependencyMissingError, WeightsUnavailableError, one_line
from conceptforge.external_errors import weights_error
from conceptforge.loaders.harness.adapters.base import OPEN_CLIP, load_revision
from conceptforge.loaders.harness.adapters.hf_dual import DualEncoderAdapter
from conceptforge.loaders.harness.embeddings import EmbeddingModel, embedding_revision, load_pil

logger = logging.getLogger(__name__)

#: The files of an open_clip checkpoint fetched from the Hub (config, weights, tokenizer files).
HUB_PATTERNS = ["open_clip_config.json", "open_clip_*.safetensors", "open_clip_*.bin", "*.txt", "tokenizer*", "*.model"]


class OpenClipEmbedder(EmbeddingModel):
    """An open_clip model as an ``EmbeddingModel``: same cache, same outputs (L2-normalised float32)."""

    def __init__(
        self,
        model: Any,
        preprocess: Any,
        tokenizer: Any,
        *,
        model_id: str,
        revision: str,
        embed_dim: int,
        cache_dir: str | Path | None = None,
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        # Not EmbeddingModel.__init__: it requires transformers' get_*_features.
        self._set_model(model, model_id=model_id, revision=revision, cache_dir=cache_dir, device=device, dtype=dtype)
        self.processor = None  # csp and clip-ft (binding-cdsm) need a transformers CLIP
        self.preprocess = preprocess
        self.tokenizer = tokenizer
        self._embed_dim = embed_dim

    @property
    def embedding_dim(self) -> int:
        return self._embed_dim

    def encode_texts_uncached(self, texts: list[str]) -> torch.Tensor:
        return self.model.encode_text(self.tokenizer(list(texts)).to(self.device))

    def encode_images_uncached(self, images: list[Any]) -> torch.Tensor:
        batch = torch.stack([self.preprocess(load_pil(image)) for image in images])
        return self.model.encode_image(batch.to(self.device, self.dtype))


def _local_folder(model: Any) -> Path:
    if model.source == "local":
        return Path(model.id)
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model.id, revision=load_revision(model), allow_patterns=HUB_PATTERNS))
    except Exception as error:  # noqa: BLE001 - any Hub failure is one line
        raise weights_error("open_clip model", model.id, error) from None


def load(model: Any, *, device: str | None, dtype: str | None, cache_dir: str | None) -> DualEncoderAdapter:
    import json

    from conceptforge.argtypes import check_device

    try:
        import open_clip
    except ImportError:
        raise DependencyMissingError(
            f"{model.id} is an open_clip model: pip install 'conceptforge[open_clip]' (open-clip-torch, torchvision)"
        ) from None
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    check_device(str(device))
    torch_dtype = getattr(torch, dtype) if dtype else torch.float32
    folder = _local_folder(model)
    precision = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}[torch_dtype]
    try:
        built, preprocess = open_clip.create_model_from_pretrained(
            f"local-dir:{folder}", device=device, precision=precision
        )
        tokenizer = open_clip.get_tokenizer(f"local-dir:{folder}")
        config = json.loads((folder / "open_clip_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RuntimeError, KeyError) as error:
        raise WeightsUnavailableError(f"cannot load open_clip model {model.id}: {one_line(error)}") from None
    revision = model.sha if model.source == "hub" and model.sha else embedding_revision(str(folder), None)
    logger.info("open_clip model %s @ %s on %s (%s)", model.id, revision, device, precision)
    embedder = OpenClipEmbedder(
        built,
        preprocess,
        tokenizer,
        model_id=model.id,
        revision=revision,
        embed_dim=int(config["model_cfg"]["embed_dim"]),
        cache_dir=cache_dir,
        device=device,
        dtype=torch_dtype,
    )
    return DualEncoderAdapter(embedder, family=OPEN_CLIP)
