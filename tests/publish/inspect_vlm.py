"""An inspect-ai model provider backed by a local generative VLM of conceptforge (``conceptforge/<path>``).

Why: inspect's own ``hf/`` provider refuses images ("HuggingFace provider does not support
multimodal content"), and the parity test of the inspect export needs a vision model inspect can
run offline. This provider is a real inspect ``ModelAPI`` (registered with ``@modelapi``): the
exported task, its dataset, solver, generate config and scorer all run in inspect unchanged;
only the model call goes to the same ``answer_text`` (greedy, chat template, image preprocessing)
that ``conceptforge evaluate``'s by-answer protocols use. Usage, once this module is imported::

    inspect_ai.eval("conceptforge_tasks.py@binding_clip_gen_accuracy", model="conceptforge/PATH")
"""

from __future__ import annotations

import base64
import io
from typing import Any

from inspect_ai.model import GenerateConfig, ModelAPI, ModelOutput, modelapi

PROVIDER = "conceptforge"


class LocalVLM(ModelAPI):
    """``model_name`` is a local model folder (or Hub id) that ``conceptforge evaluate`` loads."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),  # noqa: B008 - inspect's own signature
        **model_args: Any,
    ) -> None:
        from conceptforge.loaders.harness.runner import ModelSession

        super().__init__(model_name, base_url, api_key, [], config)
        self.session = ModelSession.open(
            model_name, device=model_args.get("device", "cpu"), cache_dir=model_args.get("cache_dir")
        )
        self.answerer = self.session.answerer()

    async def generate(self, input, tools, tool_choice, config) -> ModelOutput:  # noqa: A002 - inspect's name
        from PIL import Image

        message = input[-1]
        images, texts = [], []
        for part in message.content if isinstance(message.content, list) else []:
            if part.type == "image":
                data = part.image.split(",", 1)[1] if part.image.startswith("data:") else part.image
                images.append(Image.open(io.BytesIO(base64.b64decode(data))))
            elif part.type == "text":
                texts.append(part.text)
        if len(images) != 1:
            raise ValueError(f"{PROVIDER}/ answers one image per turn, got {len(images)}")
        answer = self.answerer.answer_text(images, ["".join(texts)], max_new_tokens=config.max_tokens or 16)[0]
        return ModelOutput.from_content(model=self.model_name, content=answer)

    def max_connections(self) -> int:
        return 1  # one local model: requests in turn

    def close(self) -> None:
        self.session.close()


@modelapi(name=PROVIDER)
def conceptforge_provider() -> type[ModelAPI]:
    return LocalVLM
