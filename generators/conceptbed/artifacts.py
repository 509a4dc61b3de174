"""A learned concept on disk: the artifact folder a learner writes, and applying it to a pipeline.

The folder holds the learned weights in diffusers' formats plus ``learner.json``; it is written
under a temp name and renamed, so a concept is either fully learned or not at all, and a rerun
skips learned concepts (:func:`train_and_save`). See :mod:`conceptforge.generators.conceptbed.learners`
for the learners themselves.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from conceptforge.errors import DataNotFoundError, WeightsUnavailableError
from conceptforge.files import write_directory_atomically
from conceptforge.generators.conceptbed.learners import (
    CONFIG_NAME,
    CUSTOM_DIFFUSION_NAME,
    EMBEDS_NAME,
    LORA_NAME,
    Components,
    ConceptTrainer,
    LearnerConfig,
    TrainState,
    add_placeholder_token,
    concept_phrase,
    cross_attention_kv,
    load_components,
)
from conceptforge.generators.conceptbed.spec import Concept
from conceptforge.output import FOLDER_MARKER

logger = logging.getLogger(__name__)


def save_artifact(
    directory: Path, config: LearnerConfig, components: Components, state: TrainState, concept: Concept
) -> None:
    """Write the learned weights and ``learner.json`` into ``directory`` (which must be new)."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    if state.token_id is not None:
        vector = components.text_encoder.get_input_embeddings().weight[state.token_id].detach().float().cpu()
        save_file({str(config.placeholder_token): vector.clone().contiguous()}, str(directory / EMBEDS_NAME))
    if config.learner == "dreambooth":
        if state.lora:
            from diffusers import StableDiffusionPipeline
            from diffusers.utils import convert_state_dict_to_diffusers
            from peft.utils import get_peft_model_state_dict

            layers = convert_state_dict_to_diffusers(get_peft_model_state_dict(components.unet))
            layers = {k: v.detach().float().cpu().contiguous() for k, v in layers.items()}
            StableDiffusionPipeline.save_lora_weights(str(directory), unet_lora_layers=layers, safe_serialization=True)
        else:
            components.unet.to(torch.float32).save_pretrained(directory / "unet", safe_serialization=True)
    elif config.learner == "custom-diffusion":
        weights = {
            name: parameter.detach().float().cpu().contiguous()
            for name, parameter in components.unet.named_parameters()
            if cross_attention_kv(name)
        }
        save_file(weights, str(directory / CUSTOM_DIFFUSION_NAME))
    metadata = {
        "config": config.to_json(),
        "concept": concept.name,
        "concept_kind": concept.kind,
        "phrase": concept_phrase(config, concept),
        "final_loss": state.history[-1] if state.history else None,
        "steps_run": len(state.history),
    }
    (directory / CONFIG_NAME).write_text(json.dumps(metadata, indent=1, sort_keys=True) + "\n", encoding="utf-8")


#: The command that writes artifact folders (their marker, and a --work-dir's).
ARTIFACT_MADE_BY = "generate conceptbed"


def artifact_complete(directory: Path) -> bool:
    """A learned concept we wrote: ``learner.json`` inside a folder carrying our marker.

    A folder with a ``learner.json`` of someone else's is not taken as learned (its weights would
    be applied to every image of the concept).
    """
    directory = Path(directory)
    if not (directory / CONFIG_NAME).is_file():
        return False
    try:
        marker = json.loads((directory / FOLDER_MARKER).read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(marker, dict) and marker.get("made_by") == ARTIFACT_MADE_BY


# An artifact folder is written whole or not at all (a crash leaves no half artifact; an
# incomplete leftover without learner.json is replaced).
write_artifact_atomically = functools.partial(write_directory_atomically, made_by=ARTIFACT_MADE_BY, flag="--work-dir")


def read_artifact_config(directory: Path) -> dict[str, Any]:
    try:
        return json.loads((Path(directory) / CONFIG_NAME).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataNotFoundError(f"{directory} is not a learned concept (no {CONFIG_NAME})") from None


class AppliedArtifact:
    """A learned concept applied to its family's pipeline (SD or LDM); ``restore()`` undoes it.

    Why undo instead of reloading: one pipeline then serves every concept in a process, and the
    token row / cross-attention weights / LoRA adapter of one concept never leak into the next.
    """

    def __init__(self, pipe: Any, directory: Path) -> None:
        from safetensors.torch import load_file

        self.pipe = pipe
        self.directory = Path(directory)
        meta = read_artifact_config(directory)
        self.config = LearnerConfig(**meta["config"])
        self.phrase: str = meta["phrase"]
        self._undo: list[Callable[[], None]] = []
        if (self.directory / EMBEDS_NAME).exists():
            text_encoder = self.config.family.text_encoder_of(pipe)  # SD's text_encoder, LDM's bert
            for token, vector in load_file(str(self.directory / EMBEDS_NAME)).items():
                token_id = add_placeholder_token(pipe.tokenizer, text_encoder, token, None)
                weight = text_encoder.get_input_embeddings().weight
                previous = weight[token_id].detach().clone()
                with torch.no_grad():
                    weight[token_id] = vector.to(weight.device, weight.dtype)
                self._undo.append(lambda w=weight, i=token_id, p=previous: w.data.__setitem__(i, p))
        if (self.directory / CUSTOM_DIFFUSION_NAME).exists():
            self._swap_unet_weights(load_file(str(self.directory / CUSTOM_DIFFUSION_NAME)))
        if (self.directory / LORA_NAME).exists():
            pipe.load_lora_weights(str(self.directory), weight_name=LORA_NAME, adapter_name="conceptbed")
            self._undo.append(lambda: pipe.delete_adapters("conceptbed"))
        if (self.directory / "unet").is_dir():
            from safetensors.torch import load_file as load

            files = sorted((self.directory / "unet").glob("*.safetensors"))
            weights: dict[str, torch.Tensor] = {}
            for file in files:
                weights.update(load(str(file)))
            self._swap_unet_weights(weights)

    def _swap_unet_weights(self, weights: dict[str, torch.Tensor]) -> None:
        params = dict(self.pipe.unet.named_parameters())
        missing = [name for name in weights if name not in params]
        if missing:
            raise WeightsUnavailableError(f"{self.directory}: weights do not fit this UNet (e.g. {missing[0]})")
        previous = {name: params[name].detach().clone() for name in weights}
        with torch.no_grad():
            for name, value in weights.items():
                params[name].copy_(value.to(params[name].device, params[name].dtype))

        def undo() -> None:
            with torch.no_grad():
                for name, value in previous.items():
                    params[name].copy_(value)

        self._undo.append(undo)

    def restore(self) -> None:
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def __enter__(self) -> AppliedArtifact:
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()


def train_and_save(
    concept: Concept,
    config: LearnerConfig,
    artifact_dir: Path,
    *,
    class_images: Sequence[Path] = (),
    components: Components | None = None,
) -> Path:
    """Train ``concept`` unless its artifact exists; write the artifact atomically."""
    if artifact_complete(artifact_dir):
        logger.info("%s: already learned (%s)", concept.name, artifact_dir)
        return artifact_dir
    comps = components or load_components(config.model_id, config.revision)
    trainer = ConceptTrainer(config, comps)
    state = trainer.train(concept, class_images=class_images)
    write_artifact_atomically(artifact_dir, lambda tmp: save_artifact(tmp, config, comps, state, concept))
    logger.info(
        "%s: learned in %d steps (final loss %.4f)",
        concept.name,
        len(state.history),
        state.history[-1] if state.history else float("nan"),
    )
    return artifact_dir
