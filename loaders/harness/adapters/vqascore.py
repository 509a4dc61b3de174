"""The VQAScore variants a generative VLM's ``match`` can compute, each named for where it comes from.

t2v_metrics (Lin et al. 2024, the reference implementation) does not score every model the same
way, so neither do we; a result names the variant it ran (docs/metrics.md, "VQAScore variants"),
and ``--task-option TASK.vqascore=NAME`` picks one:

* ``t2v-llava-1.5``: t2v_metrics' LLaVA-1.5 (and CLIP-FlanT5) scorer, prompt and all: its own
  Vicuna conversation string, not the checkpoint's chat template —
  ``{system} USER: <image>\\n{question} ASSISTANT: `` with t2v's system message, the question
  ``Does this figure show "{text}"? Please answer yes or no.`` and the answer ``Yes`` followed by
  the end-of-sequence token, teacher-forced; the score is exp(−mean cross-entropy) over the answer
  tokens (those the answer adds to the prompt's tokens), i.e. the geometric mean of
  P(Yes | prompt) and P(end | prompt, Yes).
* ``t2v-instructblip``: t2v_metrics' InstructBLIP rule: no conversation, the question
  ``Question: Does this figure show "{text}"? Please answer yes or no.`` after the image, the
  lower-case answer ``yes`` + end of sequence teacher-forced, exp(−mean CE) likewise.
* ``teacher-forced-chat`` (ours): t2v's LLaVA question and answer rule inside the checkpoint's own
  chat template (the reply ``Yes`` up to the template's end of turn): for LLaVA checkpoints on
  other language models, whose template is not Vicuna's.
* ``t2v-qwen2-vl``: t2v_metrics' HF-native Qwen2-VL scorer: ``Does this image show "{text}"?``
  in the chat template and the next-token probability of the single id
  ``tokenizer.encode("Yes")[0]``.
* ``t2v-llava-onevision``: its HF-native LLaVA-OneVision scorer: the same rule after
  ``Does this image show "{text}"? Answer the question with Yes or No``.
* ``next-token`` (ours, for families t2v_metrics does not define): the LLaVA-1.5 question in the
  chat template and the next-token P("Yes") + P(" Yes") (each counted when it is one token), the
  whole vocabulary's softmax, one forward per pair.

Default (``auto``): the family's t2v_metrics rule where it has one (model types ``llava``,
``instructblip``, ``qwen2_vl``, ``llava_onevision``), so a number called VQAScore is the metric
t2v_metrics publishes for that checkpoint; ``next-token`` for every other family (no reference
rule exists there; it is the rule the yes/no oracle and the allowed-mass check read anyway).
Every variant's score is kept as its natural logarithm in float64 from the forward pass on.
"""

from __future__ import annotations

from dataclasses import dataclass

from conceptforge.errors import InvalidArgumentError

NEXT_TOKEN = "next-token"  # P("Yes") [+ P(" Yes")] as the next token
SINGLE_TOKEN = "single-token"  # P(tokenizer.encode("Yes")[0]) as the next token
TEACHER_FORCED = "teacher-forced"  # exp(mean log P) of the answer + end of sequence

#: How the question becomes the model's prompt.
CHAT = "chat-template"  # the checkpoint's chat template: one user turn (image, question), assistant opened
LLAVA_V1 = "t2v-llava-v1"  # t2v_metrics' LLaVA-1.5 conversation string (Vicuna v1 with its system message)
PLAIN = "plain"  # no conversation: the image, then the question (t2v_metrics' InstructBLIP)

LLAVA_QUESTION = 'Does this figure show "{text}"? Please answer yes or no.'
INSTRUCTBLIP_QUESTION = 'Question: Does this figure show "{text}"? Please answer yes or no.'
#: t2v_metrics' ``SYSTEM_MSG`` (its constants, "copied from llava": Vicuna v1's system prompt).
T2V_SYSTEM_MESSAGE = (
    "A chat between a curious user and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the user's questions."
)
AUTO = "auto"  # the task option's value for "the family's default"


@dataclass(frozen=True)
class VQAScoreVariant:
    """One way of turning (image, text) into a VQAScore: the question, the conversation it is
    asked in, the answer, the rule that reads the model, and where it comes from."""

    name: str
    question: str
    rule: str
    source: str
    conversation: str = CHAT
    answer: str = "Yes"

    def describe(self) -> str:
        """The protocol line a result carries."""
        how = {
            NEXT_TOKEN: f"P({self.answer!r}) as the next token",
            SINGLE_TOKEN: f"P(tokenizer.encode({self.answer!r})[0]) as the next token",
            TEACHER_FORCED: f"exp(-mean CE) of the teacher-forced answer {self.answer!r} + end of sequence",
        }[self.rule]
        where = {
            CHAT: "in the checkpoint's chat template",
            LLAVA_V1: "in t2v_metrics' LLaVA-1.5 conversation (Vicuna system message)",
            PLAIN: "after the image, no conversation",
        }[self.conversation]
        return f"VQAScore ({self.name}, {self.source}): {how} after {self.question!r} {where}; natural log, float64"

    def prompt(self, question: str, *, image_token: str, processor_adds_image: bool = False) -> str:
        """The whole prompt string of a conversation other than the chat template (the bytes the
        processor tokenises; ``image_token`` is expanded by it into the image's tokens), up to where
        the answer starts. ``processor_adds_image``: the processor puts the image tokens in front
        itself (InstructBLIP's), so the prompt holds only the text."""
        if self.conversation == LLAVA_V1:  # t2v: SYSTEM_MSG + " USER: " + "<image>" + "\n" + q + " ASSISTANT: "
            return f"{T2V_SYSTEM_MESSAGE} USER: {image_token}\n{question} ASSISTANT: "
        if self.conversation == PLAIN:
            return question if processor_adds_image else f"{image_token}{question}"
        raise ValueError(f"variant {self.name} asks in the chat template, not a prompt string")

    def answer_suffix(self, eos_token: str) -> str:
        """What is teacher-forced after :meth:`prompt`: t2v's LLaVA answer ``Yes</s>`` right after
        "ASSISTANT: "; the plain (InstructBLIP) answer as its own word, `` yes</s>`` (t2v feeds
        it to the decoder apart from the question)."""
        if self.conversation == LLAVA_V1:
            return f"{self.answer}{eos_token}"
        return f" {self.answer}{eos_token}"


VQASCORE_VARIANTS = {
    v.name: v
    for v in (
        VQAScoreVariant(
            "t2v-llava-1.5", LLAVA_QUESTION, TEACHER_FORCED, "t2v_metrics' LLaVA-1.5 scorer", conversation=LLAVA_V1
        ),
        VQAScoreVariant(
            "t2v-instructblip",
            INSTRUCTBLIP_QUESTION,
            TEACHER_FORCED,
            "t2v_metrics' InstructBLIP scorer",
            conversation=PLAIN,
            answer="yes",
        ),
        VQAScoreVariant("teacher-forced-chat", LLAVA_QUESTION, TEACHER_FORCED, "ours, t2v_metrics' LLaVA rule"),
        VQAScoreVariant("t2v-qwen2-vl", 'Does this image show "{text}"?', SINGLE_TOKEN, "t2v_metrics' Qwen2-VL scorer"),
        VQAScoreVariant(
            "t2v-llava-onevision",
            'Does this image show "{text}"? Answer the question with Yes or No',
            SINGLE_TOKEN,
            "t2v_metrics' LLaVA-OneVision scorer",
        ),
        VQAScoreVariant(NEXT_TOKEN, LLAVA_QUESTION, NEXT_TOKEN, "ours"),
    )
}
#: The ``vqascore`` task option's values: ``auto`` and every variant's name.
VQASCORE_CHOICES = (AUTO, *VQASCORE_VARIANTS)
#: The family's t2v_metrics rule, by ``config.json``'s ``model_type``; every other type: next-token.
DEFAULT_VARIANT_BY_MODEL_TYPE = {
    "llava": "t2v-llava-1.5",
    "instructblip": "t2v-instructblip",
    "qwen2_vl": "t2v-qwen2-vl",
    "llava_onevision": "t2v-llava-onevision",
}


def vqascore_variant(name: str | None, *, model_type: str | None) -> VQAScoreVariant:
    """``name``, or the default of ``model_type`` when None or ``auto`` (see the module docstring)."""
    if name is None or name == AUTO:
        name = DEFAULT_VARIANT_BY_MODEL_TYPE.get(model_type or "", NEXT_TOKEN)
    if name not in VQASCORE_VARIANTS:
        raise InvalidArgumentError(f"VQAScore variant {name!r}: one of {', '.join(VQASCORE_VARIANTS)}")
    return VQASCORE_VARIANTS[name]
