"""A tiny random open_clip model saved as an open_clip checkpoint folder (offline tests).

open_clip builds any architecture from the ``model_cfg`` of an ``open_clip_config.json`` without
weights; the builder saves such a config (2-layer towers of width 32, 32 px images, 16-d
embeddings; open_clip's bundled BPE tokenizer, so nothing is downloaded) and the random weights
as ``open_clip_model.safetensors`` — the layout of a Hub repo that ``hf-hub:`` ids point at.
"""

from __future__ import annotations

import json
from pathlib import Path


def build_tiny_open_clip(out_dir: str | Path, *, seed: int = 0, image_size: int = 32, context_length: int = 32) -> Path:
    import open_clip
    import torch
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "model_cfg": {
            "embed_dim": 16,
            "vision_cfg": {"image_size": image_size, "layers": 2, "width": 32, "head_width": 16, "patch_size": 8},
            "text_cfg": {"context_length": context_length, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
        },
        "preprocess_cfg": {
            "mean": [0.48145466, 0.4578275, 0.40821073],
            "std": [0.26862954, 0.26130258, 0.27577711],
        },
    }
    (out_dir / "open_clip_config.json").write_text(json.dumps(config, indent=1))
    torch.manual_seed(seed)
    model = open_clip.create_model(f"local-dir:{out_dir}")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(out_dir / "open_clip_model.safetensors"))
    return out_dir
