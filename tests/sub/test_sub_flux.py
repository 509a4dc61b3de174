"""The TDG loop over a tiny random FluxPipeline loaded offline through from_pretrained."""

import pytest
import torch

from conceptforge.errors import ConceptforgeError
from conceptforge.generators.sub.flux_tdg import DEFAULT_MODEL, TDGFlux, resolve_device
from conceptforge.generators.sub.tdg import TDGParams
from tests.sub.sub_helpers import TDG_PROMPTS

SIZE = dict(height=32, width=32, num_inference_steps=4)


def test_untied_loop_is_flux_pipeline_call_bit_for_bit(tiny_flux):
    """eta = 0 at every step reproduces FluxPipeline.__call__ on the batch exactly."""
    with torch.no_grad():
        ours = tiny_flux.denoise(TDG_PROMPTS, seed=5, eta=lambda t: 0.0, **SIZE)
        untied = tiny_flux.denoise(TDG_PROMPTS, seed=5, eta=None, **SIZE)
    noise, _ = tiny_flux.initial_noise(5, 32, 32, torch.float32)
    pipe = tiny_flux.pipe
    reference = pipe(
        TDG_PROMPTS,
        latents=noise.repeat(2, 1, 1),
        output_type="latent",
        guidance_scale=3.5,
        max_sequence_length=tiny_flux.max_sequence_length,
        **SIZE,
    ).images
    assert torch.equal(ours.latents, reference)
    assert torch.equal(untied.latents, reference)
    assert ours.etas == [0.0] * 4
    assert ours.times[0] == 1.0 and ours.times == sorted(ours.times, reverse=True)


def test_eta_one_makes_r_and_g_identical_at_every_step(tiny_flux):
    seen = []

    def on_step(i, t, eta, noise_pred, latents):
        seen.append(i)
        assert torch.equal(noise_pred[0], noise_pred[1])
        assert torch.equal(latents[0], latents[1])

    with torch.no_grad():
        result = tiny_flux.denoise(TDG_PROMPTS, seed=1, eta=lambda t: 1.0, on_step=on_step, **SIZE)
    assert seen == [0, 1, 2, 3] and result.etas == [1.0] * 4


def test_tdg_schedule_ties_early_and_frees_late(tiny_flux):
    params = TDGParams(k=1.0, tmin=0.2, tmax=0.9)
    fractions = []

    def on_step(i, t, eta, noise_pred, latents):
        fractions.append(((noise_pred[0] == noise_pred[1]).float().mean().item(), eta))

    from conceptforge.generators.sub.tdg import eta_schedule

    with torch.no_grad():
        tiny_flux.denoise(
            TDG_PROMPTS,
            seed=2,
            eta=lambda t: eta_schedule(t, params.tmin, params.tmax, params.k),
            on_step=on_step,
            height=32,
            width=32,
            num_inference_steps=8,
        )
    assert fractions[0] == (1.0, 1.0)
    for fraction, eta in fractions:
        assert fraction >= eta - 1e-6  # at least the eta share of elements got the shared mean
    assert fractions[-1][1] == 0.0 and fractions[-1][0] < 0.5


def test_generate_modes(tiny_flux):
    tdg = tiny_flux.generate(
        prompt_reference=TDG_PROMPTS[0], prompt_guidance=TDG_PROMPTS[1], seed=3, return_guidance=True, **SIZE
    )
    again = tiny_flux.generate(prompt_reference=TDG_PROMPTS[0], prompt_guidance=TDG_PROMPTS[1], seed=3, **SIZE)
    assert tdg.reference.size == (32, 32) and tdg.guidance is not None and again.guidance is None
    assert tdg.reference.tobytes() == again.reference.tobytes()  # deterministic
    baseline = tiny_flux.generate(
        prompt_reference=TDG_PROMPTS[0], prompt_guidance=None, seed=3, mode="prompt-only", **SIZE
    )
    with torch.no_grad():
        alone = tiny_flux.denoise(TDG_PROMPTS[:1], seed=3, **SIZE)
    assert baseline.reference.tobytes() == tiny_flux.decode(alone.latents, 32, 32)[0].tobytes()
    assert baseline.reference.tobytes() != tdg.reference.tobytes()
    with pytest.raises(ConceptforgeError, match="multiple of 4"):
        tiny_flux.generate(
            prompt_reference="x", prompt_guidance="y", seed=0, height=30, width=32, num_inference_steps=1
        )
    with pytest.raises(ValueError, match="unknown mode"):
        tiny_flux.generate(prompt_reference="x", prompt_guidance="y", seed=0, mode="nope", **SIZE)
    # A NaN image is an error of the item (the engine retries, then records it), not a black picture.
    from conceptforge.errors import ItemError

    with pytest.raises(ItemError, match="came out NaN"):
        tiny_flux.decode(torch.full_like(alone.latents, float("nan")), 32, 32)


def test_loading_errors_are_one_line(tmp_path, monkeypatch, hub_offline):
    with pytest.raises(ConceptforgeError, match="not a FLUX pipeline folder"):
        TDGFlux.from_pretrained(str(tmp_path), device="cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConceptforgeError, match="needs a CUDA GPU") as offline:
        resolve_device("auto", model=DEFAULT_MODEL)
    # offline, the GPU is not the only thing missing: the weights are not cached either
    assert "offline mode (HF_HUB_OFFLINE=1) and black-forest-labs/FLUX.1-dev is not in the local cache" in str(
        offline.value
    )
    with pytest.raises(ConceptforgeError, match="no CUDA GPU is visible"):
        resolve_device("cpu", model=DEFAULT_MODEL, offload=True)
    with pytest.raises(ConceptforgeError) as uncached:  # offline and never downloaded: said so, not "log in"
        TDGFlux.from_pretrained("some-org/not-cached-flux", device="cpu")
    assert str(uncached.value) == (
        "--model: some-org/not-cached-flux is not in the cache and HF_HUB_OFFLINE=1: download it where there is "
        "network (or unset HF_HUB_OFFLINE), or pass a local folder"
    )


def test_revision_recorded_for_local_folder(tiny_flux, tiny_flux_dir):
    from conceptforge.cards.provenance import local_fingerprint

    # the folder's fingerprint, as every other local model of a card is spelled (CRO2), not a bare "local"
    assert tiny_flux.model_revision == local_fingerprint(tiny_flux_dir)
    assert tiny_flux.model_revision.startswith("local-sha256:")
    assert tiny_flux.pipe.transformer.dtype == torch.float32


def test_several_pairs_per_batch_give_the_images_of_one_pair_at_a_time(tiny_flux):
    """--pairs-per-batch: three pairs (two schedules, so their etas differ at some steps) in one
    transformer batch of 6 give byte-identical images to three batches of 2 on the CPU; so do
    prompt-only images (batch of 3 vs 1)."""
    from conceptforge.cards.grid import png_bytes
    from conceptforge.generators.sub.flux_tdg import PairRequest

    pattern, colour = TDGParams(k=10, tmin=0.2, tmax=0.6), TDGParams(k=10, tmin=0.2, tmax=0.9)
    requests = [
        PairRequest("a photo of a Blue Jay with a striped wing", "a photo of a bird with a striped wing", 11, pattern),
        PairRequest("a photo of a Cardinal with a black crown", "a photo of a bird with a black crown", 12, colour),
        PairRequest("a photo of a Blue Jay with a black crown", "a photo of a bird with a black crown", 13, colour),
    ]
    size = dict(height=32, width=32, num_inference_steps=6)
    for mode in ("tdg", "prompt-only"):
        batched = tiny_flux.generate_batch(requests, mode=mode, return_guidance=mode == "tdg", **size)
        alone = [tiny_flux.generate_batch([r], mode=mode, return_guidance=mode == "tdg", **size)[0] for r in requests]
        for together, single in zip(batched, alone):
            assert png_bytes(together.reference) == png_bytes(single.reference)
            assert together.etas == single.etas
            if mode == "tdg":
                assert png_bytes(together.guidance) == png_bytes(single.guidance)
    tdg = tiny_flux.generate_batch(requests, mode="tdg", **size)
    assert tdg[0].etas != tdg[1].etas  # the pattern schedule frees the pair earlier: mixed etas were tied apart


def test_fast_path_options_reach_the_transformer(tiny_flux_dir):
    """--compile compiles the transformer in place (run on a GPU by the device check: compiling
    even the tiny model takes minutes on this CPU); --attention-backend sets diffusers' backend,
    and one this machine cannot run is a clear error."""
    from conceptforge.errors import InvalidArgumentError
    from conceptforge.generators.sub.flux_tdg import TDGFlux
    from conceptforge.generators.sub.stage import GenerationSettings, apply_fast_paths

    flux = TDGFlux.from_pretrained(str(tiny_flux_dir), device="cpu", max_sequence_length=16)
    transformer = flux.pipe.transformer
    assert transformer._compiled_call_impl is None
    apply_fast_paths(flux, GenerationSettings(compile=True, attention_backend="_native_math"))
    assert flux.pipe.transformer is transformer and transformer._compiled_call_impl is not None
    assert str(transformer.transformer_blocks[0].attn.processor._attention_backend) in {
        "_native_math",
        "AttentionBackendName._NATIVE_MATH",
    }
    settings = GenerationSettings(pairs_per_batch=2, compile=True)
    assert settings.to_config()["pairs_per_batch"] == 2 and "attention_backend" not in settings.to_config()
    with pytest.raises(InvalidArgumentError, match="--pairs-per-batch must be >= 1"):
        GenerationSettings(pairs_per_batch=0)
    with pytest.raises(InvalidArgumentError, match="--attention-backend _native_flash is a CUDA kernel"):
        apply_fast_paths(flux, GenerationSettings(attention_backend="_native_flash"))  # needs CUDA
