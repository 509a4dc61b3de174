"""Model inputs for VQA batches without the processor's per-image NumPy path, checked against it.

Why: with a small model the processor call (tokenising 200-odd tokens per prompt, then resizing,
rescaling and normalising each image in float64 NumPy) is a visible share of a batch's time,
and for the first batch nothing can overlap it. A filter run asks a few question texts about
thousands of images of a few sizes, so:

- the token ids of a (prompt, image size) pair are taken from one real processor call and reused
  (the number of image tokens a processor inserts depends on the image size, never its content);
- images are resized straight from PIL with the same filter the processor uses (no NumPy ->
  PIL -> NumPy round trips), cropped as views, then rescaled and normalised for the whole batch
  in one float32 torch operation.

Nothing is assumed blindly: for each (prompt, image size) the processor is called once on a fixed
probe image of that size, and the fast path is used only for batches whose every key reproduces
it (same ids, pixel values within ``PIXEL_ATOL``, checked once per image size) when the processor
returns nothing else; a size that does not match goes through the processor. The choice depends
on the batch alone, never on what was encoded before it, so a resumed or sharded run encodes each
batch exactly as an uninterrupted one (issue 32: the first batch of every process used to take the
processor's float64 path, the others the fast one, and the scores differed in the last digits).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np
import torch
from PIL import Image

logger = logging.getLogger(__name__)

#: Largest difference to the processor's pixel values accepted (float32 vs float64 rounding).
PIXEL_ATOL = 1e-4
_FAST_KEYS = {"input_ids", "attention_mask", "pixel_values"}


def _get(config: Any, key: str) -> Any:
    if config is None:
        return None
    if isinstance(config, dict):
        return config.get(key)
    return getattr(config, key, None)


class ClipStylePixels:
    """Resize (shortest edge or fixed size) + centre crop + rescale + normalise, as CLIP-style processors do.

    ``from_image_processor`` returns None for any other kind of image processor.
    """

    def __init__(
        self,
        *,
        size: dict[str, int],
        crop: tuple[int, int] | None,
        resample: int,
        scale: float | None,
        mean: Sequence[float] | None,
        std: Sequence[float] | None,
    ) -> None:
        self.size = size
        self.crop = crop
        self.resample = resample
        self.scale = scale
        self.mean = torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1) if mean is not None else None
        self.std = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1) if std is not None else None

    @classmethod
    def from_image_processor(cls, processor: Any) -> ClipStylePixels | None:
        if processor is None or not getattr(processor, "do_resize", False):
            return None
        if any(
            getattr(processor, flag, False)
            for flag in (
                "do_pad",
                "do_convert_grayscale",
                "crop_to_patches",
                "do_image_splitting",
                "image_grid_pinpoints",
            )
        ):
            return None  # tiles, padding or other steps this class does not reproduce
        size = {key: _get(processor.size, key) for key in ("shortest_edge", "longest_edge", "height", "width")}
        if size["shortest_edge"] and not size["longest_edge"] and not size["height"]:
            size = {"shortest_edge": int(size["shortest_edge"])}
        elif size["height"] and size["width"] and not size["shortest_edge"]:
            size = {"height": int(size["height"]), "width": int(size["width"])}
        else:
            return None
        crop = None
        if getattr(processor, "do_center_crop", False):
            height, width = _get(processor.crop_size, "height"), _get(processor.crop_size, "width")
            if not height or not width:
                return None
            crop = (int(height), int(width))
        resample = getattr(processor, "resample", None)
        if resample is None or not isinstance(resample, int):
            return None
        scale = float(processor.rescale_factor) if getattr(processor, "do_rescale", False) else None
        normalise = getattr(processor, "do_normalize", False)
        mean, std = getattr(processor, "image_mean", None), getattr(processor, "image_std", None)
        if normalise:
            mean = [mean] * 3 if isinstance(mean, (int, float)) else mean
            std = [std] * 3 if isinstance(std, (int, float)) else std
            if mean is None or std is None or len(mean) != 3 or len(std) != 3:
                return None
        return cls(
            size=size,
            crop=crop,
            resample=int(resample),
            scale=scale,
            mean=mean if normalise else None,
            std=std if normalise else None,
        )

    def resized_size(self, width: int, height: int) -> tuple[int, int]:
        """(height, width) after the resize, by transformers' own rule (shortest edge, int rounding)."""
        if "height" in self.size:
            return self.size["height"], self.size["width"]
        from transformers.image_transforms import get_resize_output_image_size

        shape_only = np.broadcast_to(np.zeros((1, 1, 1), np.uint8), (3, height, width))
        new_height, new_width = get_resize_output_image_size(
            shape_only, size=self.size["shortest_edge"], default_to_square=False, input_data_format="channels_first"
        )
        return int(new_height), int(new_width)

    def _one(self, image: Image.Image) -> np.ndarray | None:
        width, height = image.size
        new_height, new_width = self.resized_size(width, height)
        if self.crop is None:
            return np.asarray(image.resize((new_width, new_height), self.resample))
        crop_height, crop_width = self.crop
        top, left = (new_height - crop_height) // 2, (new_width - crop_width) // 2
        if top < 0 or left < 0:
            return None  # the processor pads with zeros here; not reproduced
        # Resizing only the cropped region (PIL's ``box``) is ~25% faster but its float box
        # edges change a few pixels by one level; the full resize then a crop is exact.
        resized = np.asarray(image.resize((new_width, new_height), self.resample))
        return resized[top : top + crop_height, left : left + crop_width]

    def _arrays(self, images: Sequence[Image.Image]) -> list[np.ndarray] | None:
        arrays = []
        for image in images:
            array = self._one(image if image.mode == "RGB" else image.convert("RGB"))
            if array is None:
                return None
            arrays.append(array)
        return arrays

    def __call__(self, images: Sequence[Image.Image], *, pool: Executor | None = None) -> torch.Tensor | None:
        """[B, 3, H, W] float32 pixel values, or None when some image needs the processor's own path.

        With ``pool`` (an idle executor), half of the images are resized there: PIL releases the
        GIL while resizing, so the batch that nothing else can overlap (the first) takes half as long.
        """
        half = len(images) // 2 if pool is not None and len(images) > 1 else 0
        other = pool.submit(self._arrays, images[:half]) if half else None
        mine = self._arrays(images[half:])
        theirs = other.result() if other is not None else []
        if mine is None or theirs is None:
            return None
        arrays = theirs + mine
        if any(array.shape != arrays[0].shape for array in arrays):
            return None
        batch = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).to(torch.float32)
        if self.scale is not None:
            batch.mul_(self.scale)
        if self.mean is not None:
            batch.sub_(self.mean).div_(self.std)
        return batch.contiguous()


class BatchEncoder:
    """``processor(text=..., images=..., padding=True, padding_side="right")``, reusing what repeats.

    Token ids are cached per (prompt, image size); pixels come from :class:`ClipStylePixels`.
    Both are used only after a processor call on a probe image showed they give its output.
    """

    def __init__(self, processor: Any, tokenizer: Any) -> None:
        self.processor = processor
        self.pad_id = tokenizer.pad_token_id
        self.pixels = ClipStylePixels.from_image_processor(getattr(processor, "image_processor", None))
        self.verified: bool | None = None if self.pixels is not None else False  # None: not checked yet
        self._ids: dict[tuple[str, tuple[int, int]], list[int]] = {}
        self._sizes: dict[tuple[int, int], bool] = {}  # image size -> fast pixels match the processor

    def __call__(
        self, images: Sequence[Image.Image], texts: Sequence[str], *, pool: Executor | None = None
    ) -> dict[str, torch.Tensor]:
        """The processor's tensors for right-padded ``texts`` with ``images``; ``pool`` see :class:`ClipStylePixels`.

        Which path a batch takes depends on the batch alone (its prompts and image sizes), never on
        what this process encoded before: float32 model outputs differ slightly between the two
        paths, and a resumed or sharded run must give the bytes of an uninterrupted one.
        """
        images = [image if image.mode == "RGB" else image.convert("RGB") for image in images]
        keys = [(text, image.size) for text, image in zip(texts, images)]
        if self.verified is not False and all(self._learn(key) for key in dict.fromkeys(keys)):
            pixels = self.pixels(images, pool=pool)
            if pixels is not None:
                input_ids, mask = self._collate([self._ids[key] for key in keys])
                return {"input_ids": input_ids, "attention_mask": mask, "pixel_values": pixels}
        return self._processor(images, texts)

    def _processor(self, images: list[Image.Image], texts: Sequence[str]) -> dict[str, torch.Tensor]:
        inputs = self.processor(
            text=list(texts), images=images, return_tensors="pt", padding=True, padding_side="right"
        )  # some processors default to left padding (InternVL)
        return {key: value for key, value in inputs.items() if isinstance(value, torch.Tensor)}

    def _collate(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        length = max(len(row) for row in rows)
        input_ids = torch.full((len(rows), length), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), length), dtype=torch.long)
        for number, row in enumerate(rows):
            input_ids[number, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[number, : len(row)] = 1
        return input_ids, mask

    def _learn(self, key: tuple[str, tuple[int, int]]) -> bool:
        """Whether the fast path reproduces the processor for ``key`` = (prompt, image size).

        Decided once per key from one processor call on a fixed probe image of that size (not on
        the batch's own images: the answer must not depend on which images came first). The
        token ids of the key are kept; the pixels are compared once per size.
        """
        if key in self._ids:
            return True
        text, size = key
        if self.verified is False or self._sizes.get(size) is False:
            return False
        probe = _probe_image(size)
        out = self._processor([probe], [text])
        if set(out) != _FAST_KEYS or not bool(out["attention_mask"].all()):
            self.verified = False  # other tensors (tiles, image sizes …) or padding: the processor's job
            return False
        if size not in self._sizes:
            pixels = self.pixels([probe])
            expected = out["pixel_values"]
            self._sizes[size] = bool(
                pixels is not None
                and pixels.shape == expected.shape
                and float((pixels - expected.float()).abs().max()) <= PIXEL_ATOL
            )
            if not self._sizes[size]:
                logger.info("VQA fast inputs differ from the processor's for %dx%d images; using the processor", *size)
                return False
        self._ids[key] = out["input_ids"][0].tolist()
        self.verified = True
        return True


def _probe_image(size: tuple[int, int]) -> Image.Image:
    """A fixed image of ``size`` with every pixel value and sharp edges (what resizing rounds)."""
    width, height = size
    x = np.arange(width, dtype=np.int64)[None, :, None]
    y = np.arange(height, dtype=np.int64)[:, None, None]
    channel = np.arange(3, dtype=np.int64)[None, None, :]
    values = (x * 37 + y * 101 + channel * 83 + (x // 7 + y // 5) % 2 * 128) % 256
    return Image.fromarray(values.astype(np.uint8), "RGB")
