"""ConceptBed learners: DreamBooth-LoRA vs full DreamBooth; Textual Inversion on an LDM vs diffusers' example loop.

Memory is measured, not estimated: the bytes of every weight, gradient and optimizer-state tensor
after a step, plus the activations autograd saves for the backward pass (captured with
``torch.autograd.graph.saved_tensors_hooks``, unique storages only). On CUDA the allocator's
``max_memory_allocated`` is reported too. The baseline is full DreamBooth (the whole UNet trained);
the printed ratio is DreamBooth-LoRA memory / full DreamBooth memory (target <= 0.5).
The model is a tiny SD built from configs (quick: UNet widths 32/64; full: 128/256, where the
balance of parameters to saved activations is closer to SD-1.5's).

Textual Inversion on a Latent Diffusion Model (ConceptBed Table 1's "Textual Inversion (LDM)",
a tiny ``LDMTextToImagePipeline``): seconds per training step of ours against the loop a user
would write from diffusers' ``examples/textual_inversion`` (each step loads and transforms an
image, encodes it with the autoencoder, runs the text encoder and UNet, AdamW on the embedding
matrix, copies the frozen rows back). Ours encodes each reference image once and samples its
latent from the cached distribution.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from benchmarks._harness import Result, interleave
from conceptforge.generators.conceptbed.learners import (
    ConceptTrainer,
    LearnerConfig,
    load_components,
    load_image_tensor,
)
from conceptforge.generators.conceptbed.spec import Concept
from conceptforge.testing.tiny_conceptbed import build_tiny_ldm, build_tiny_sd


class SavedActivations:
    """Peak bytes of tensors saved for backward during one forward pass (unique storages)."""

    def __init__(self) -> None:
        self.storages: dict[int, int] = {}
        self.peak = 0
        self.exclude: set[int] = set()  # parameter storages: already counted as weights

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        self.storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    def step_done(self) -> None:
        self.peak = max(self.peak, sum(n for ptr, n in self.storages.items() if ptr not in self.exclude))
        self.storages.clear()


def _tensor_bytes(tensors) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        if t is not None and isinstance(t, torch.Tensor):
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())


def measure(
    model_id: str, learner: str, mode: str, images: list[Path], class_images: list[Path], steps: int, resolution: int
) -> dict:
    comps = load_components(model_id)
    config = LearnerConfig(
        learner=learner,
        model_id=model_id,
        steps=steps,
        resolution=resolution,
        dreambooth_mode=mode,
        num_class_images=len(class_images),
    )
    trainer = ConceptTrainer(config, comps)
    concept = Concept(name="beagle", kind="object", parent="dog", reference_images=tuple(images))
    saved = SavedActivations()
    times: list[float] = []
    last = [time.perf_counter()]

    def on_step(step: int, loss: float) -> None:
        saved.exclude = {
            p.untyped_storage().data_ptr() for m in (comps.unet, comps.vae, comps.text_encoder) for p in m.parameters()
        }
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now
        saved.step_done()

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    optimizers = []
    original_adamw = torch.optim.AdamW

    class RecordingAdamW(original_adamw):  # keep a handle on the optimizer to count its state
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            optimizers.append(self)

    torch.optim.AdamW = RecordingAdamW
    try:
        with torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
            last[0] = time.perf_counter()
            state = trainer.train(
                concept, class_images=class_images if config.uses_prior else (), step_callback=on_step
            )
    finally:
        torch.optim.AdamW = original_adamw
    modules = (comps.unet, comps.vae, comps.text_encoder)
    weights = _tensor_bytes(p for m in modules for p in m.parameters())
    grads_and_state = _tensor_bytes(p.grad for p in state.parameters) + _tensor_bytes(
        v
        for opt in optimizers
        for s in opt.state.values()
        for v in s.values()
        if isinstance(v, torch.Tensor) and v.dim() > 0
    )
    trainable = sum(p.numel() for p in state.parameters if p.requires_grad)
    result = {
        "learner": learner if learner != "dreambooth" else f"dreambooth-{mode}",
        "s_per_step": float(np.median(times[1:] if len(times) > 1 else times)),
        "trainable": trainable,
        "weights_mb": weights / 2**20,
        "grad_optim_mb": grads_and_state / 2**20,
        "activations_mb": saved.peak / 2**20,
    }
    result["total_mb"] = result["weights_mb"] + result["grad_optim_mb"] + result["activations_mb"]
    if torch.cuda.is_available():
        result["cuda_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return result


class StepClock:
    """Wall and CPU seconds of each step after the first (which pays one-time set-up)."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.last = (time.perf_counter(), time.process_time())

    def tick(self, *_args: object) -> None:
        now = (time.perf_counter(), time.process_time())
        self.wall.append(now[0] - self.last[0])
        self.cpu.append(now[1] - self.last[1])
        self.last = now

    def medians(self) -> tuple[float, float]:
        return float(np.median(self.wall[1:])), float(np.median(self.cpu[1:]))


def ti_ldm_ours(model_id: str, images: list[Path], steps: int, resolution: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds per step of our Textual Inversion on the LDM."""
    comps = load_components(model_id)
    config = LearnerConfig(
        learner="textual-inversion", pipeline="ldm", model_id=model_id, steps=steps, resolution=resolution
    )
    concept = Concept(name="beagle", kind="object", parent="dog", reference_images=tuple(images))
    trainer = ConceptTrainer(config, comps)
    clock = StepClock()
    trainer.train(concept, step_callback=clock.tick)
    return clock.medians()


def ti_ldm_diffusers_example(model_id: str, images: list[Path], steps: int, resolution: int) -> tuple[float, float]:
    """The same training as a user writes it from diffusers' textual_inversion example, on the LDM's
    parts (``bert`` for ``text_encoder``, ``vqvae`` for ``vae``); median (wall, CPU) seconds per step."""
    import random

    import torch.nn.functional as F

    comps = load_components(model_id)
    tokenizer, text_encoder, vae, unet, scheduler = (
        comps.tokenizer,
        comps.text_encoder,
        comps.vae,
        comps.unet,
        comps.noise_scheduler,
    )
    token_id = tokenizer.convert_tokens_to_ids("*")
    embeddings = text_encoder.get_input_embeddings()
    with torch.no_grad():
        embeddings.weight[token_id] = embeddings.weight[tokenizer.encode("dog", add_special_tokens=False)].mean(0)
    for module in (vae, unet, text_encoder):
        module.requires_grad_(False)
    embeddings.weight.requires_grad_(True)
    optimizer = torch.optim.AdamW([embeddings.weight], lr=5e-4, weight_decay=0.0)
    original = embeddings.weight.detach().clone()
    frozen = torch.ones(len(original), dtype=torch.bool)
    frozen[token_id] = False
    rng = random.Random(0)
    text_encoder.train()
    clock = StepClock()
    for _ in range(steps):
        pixels = load_image_tensor(rng.choice(images), resolution).unsqueeze(0)  # the example's dataset item
        latents = vae.encode(pixels).latent_dist.sample().detach() * vae.config.scaling_factor
        noise = torch.randn_like(latents)
        timesteps = torch.randint(0, scheduler.config.num_train_timesteps, (1,))
        noisy = scheduler.add_noise(latents, noise, timesteps)
        ids = tokenizer(
            "a photo of a *", padding="max_length", truncation=True, max_length=77, return_tensors="pt"
        ).input_ids
        prediction = unet(noisy, timesteps, text_encoder(ids)[0]).sample
        loss = F.mse_loss(prediction.float(), noise.float(), reduction="mean")
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        with torch.no_grad():
            embeddings.weight[frozen] = original[frozen]
        clock.tick()
    return clock.medians()


def ti_ldm_result(root: Path, images: list[Path], quick: bool) -> Result:
    steps, repeats = (9, 5) if quick else (21, 7)
    model_id = str(build_tiny_ldm(root / "ldm", sample_size=8))  # 64 px images, 8x8 latents
    ours: list[tuple[float, float]] = []
    baseline: list[tuple[float, float]] = []
    ti_ldm_ours(model_id, images, 2, 64), ti_ldm_diffusers_example(model_id, images, 2, 64)  # warm-up
    interleave(
        lambda _r: ours.append(ti_ldm_ours(model_id, images, steps, 64)),
        lambda _r: baseline.append(ti_ldm_diffusers_example(model_id, images, steps, 64)),
        repeats,
    )
    return Result(
        "ConceptBed Textual Inversion (LDM) step",
        "ours: TI on LDMTextToImagePipeline",
        [wall for wall, _ in ours],
        "diffusers textual_inversion example loop",
        [wall for wall, _ in baseline],
        work=f"seconds per training step (median of {steps - 1}), tiny LDM (LDMBert, KL autoencoder /8), 64 px",
        ours_cpu=[cpu for _, cpu in ours],
        baseline_cpu=[cpu for _, cpu in baseline],
    )


def run(quick: bool) -> list[Result]:
    """DreamBooth-LoRA vs full DreamBooth: time per step (interleaved) and measured training memory;
    Textual Inversion on an LDM vs the diffusers example loop."""
    width, steps, repeats = (32, 3, 5) if quick else (128, 4, 7)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_id = str(build_tiny_sd(root / "sd", block_out_channels=(width, 2 * width)))
        rng = np.random.default_rng(0)
        images, class_images = [], []
        for i in range(4):
            for folder, bucket in (("ref", images), ("cls", class_images)):
                path = root / f"{folder}{i}.png"
                Image.fromarray(rng.integers(0, 255, (48, 48, 3), dtype=np.uint8)).save(path)
                bucket.append(path)
        rows: dict[str, list[dict]] = {"lora": [], "full": []}

        def side(mode: str):
            def fn(_round: int) -> None:
                rows[mode].append(measure(model_id, "dreambooth", mode, images, class_images, steps, 32))

            return fn

        interleave(side("lora"), side("full"), repeats)
        ti_ldm = ti_ldm_result(root, images, quick)
    lora, full = rows["lora"][-1], rows["full"][-1]
    return [
        Result(
            "ConceptBed DreamBooth step",
            "ours: DreamBooth-LoRA",
            [r["s_per_step"] for r in rows["lora"]],
            "full DreamBooth (whole UNet)",
            [r["s_per_step"] for r in rows["full"]],
            work=f"seconds per training step, tiny SD with UNet widths {width}/{2 * width}, batch 1 + 1 class image, 32 px",
            extra={
                "training memory LoRA / full (weights + grads + Adam + saved activations)": (
                    f"{lora['total_mb']:.1f} / {full['total_mb']:.1f} MiB = {lora['total_mb'] / full['total_mb']:.2f}x"
                ),
                "trainable parameters LoRA / full": f"{lora['trainable']:,} / {full['trainable']:,}",
            },
        ),
        ti_ldm,
    ]
