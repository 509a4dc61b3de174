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

Nothing is assumed blindly: a batch with a prompt or image size not seen yet goes through the
processor, and the fast path is used only while it reproduces those batches (same ids, same
mask, pixel values within ``PIXEL_ATOL``, checked once per image size) and the processor returns
nothing else; after one mismatch every batch goes through the processor.
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
    Both are used only after a processor batch showed they give the processor's output.
    """

    def __init__(self, processor: Any, tokenizer: Any) -> None:
        self.processor = processor
        self.pad_id = tokenizer.pad_token_id
        self.pixels = ClipStylePixels.from_image_processor(getattr(processor, "image_processor", None))
        self.verified: bool | None = None if self.pixels is not None else False  # None: not checked yet
        self._ids: dict[tuple[str, tuple[int, int]], list[int]] = {}
        self._sizes: set[tuple[int, int]] = set()  # image sizes whose fast pixels matched the processor

    def __call__(
        self, images: Sequence[Image.Image], texts: Sequence[str], *, pool: Executor | None = None
    ) -> dict[str, torch.Tensor]:
        """The processor's tensors for right-padded ``texts`` with ``images``; ``pool`` see :class:`ClipStylePixels`."""
        images = [image if image.mode == "RGB" else image.convert("RGB") for image in images]
        keys = [(text, image.size) for text, image in zip(texts, images)]
        if self.verified and all(key in self._ids for key in keys):
            pixels = self.pixels(images, pool=pool)
            if pixels is not None:
                input_ids, mask = self._collate([self._ids[key] for key in keys])
                return {"input_ids": input_ids, "attention_mask": mask, "pixel_values": pixels}
        return self._processor_batch(images, texts, keys)

    def _collate(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        length = max(len(row) for row in rows)
        input_ids = torch.full((len(rows), length), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), length), dtype=torch.long)
        for number, row in enumerate(rows):
            input_ids[number, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[number, : len(row)] = 1
        return input_ids, mask

    def _processor_batch(
        self, images: list[Image.Image], texts: Sequence[str], keys: list[tuple[str, tuple[int, int]]]
    ) -> dict[str, torch.Tensor]:
        inputs = self.processor(
            text=list(texts), images=images, return_tensors="pt", padding=True, padding_side="right"
        )  # some processors default to left padding (InternVL)
        out = {key: value for key, value in inputs.items() if isinstance(value, torch.Tensor)}
        if self.verified is False or set(out) != _FAST_KEYS:
            self.verified = False
            return out
        ids, mask = out["input_ids"], out["attention_mask"]
        rows = {}
        for number, key in enumerate(keys):
            length = int(mask[number].sum())
            if not bool(mask[number, :length].all()):
                self.verified = False  # not right-padded: leave it to the processor
                return out
            rows[key] = ids[number, :length].tolist()
        if not self._check(images, keys, rows, out):
            logger.info("VQA fast inputs differ from the processor's; using the processor for every batch")
            self.verified = False
            return out
        self.verified = True
        self._ids.update(rows)
        return out

    def _check(
        self,
        images: list[Image.Image],
        keys: list[tuple[str, tuple[int, int]]],
        rows: dict[tuple[str, tuple[int, int]], list[int]],
        out: dict[str, torch.Tensor],
    ) -> bool:
        """Collation always; pixels of images whose size was not checked yet (once per size)."""
        input_ids, mask = self._collate([rows[key] for key in keys])
        if not (torch.equal(input_ids, out["input_ids"].long()) and torch.equal(mask, out["attention_mask"].long())):
            return False
        new = [number for number, image in enumerate(images) if image.size not in self._sizes]
        if new:
            pixels = self.pixels([images[number] for number in new])
            expected = out["pixel_values"]
            if pixels is None or expected.shape[0] != len(images) or pixels.shape[1:] != expected.shape[1:]:
                return False
            if float((pixels - expected[new].float()).abs().max()) > PIXEL_ATOL:
                return False
            self._sizes.update(images[number].size for number in new)
        return True
