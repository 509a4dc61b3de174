"""The VQAScore variants a generative VLM's ``match`` can compute, each named for where it comes from.

t2v_metrics (Lin et al. 2024, the reference implementation) does not score every model the same
way, so neither do we; a result names the variant it ran (docs/metrics.md):

* ``t2v-llava-1.5``: t2v_metrics' LLaVA-1.5 (and CLIP-FlanT5) scorer. The question
  ``Does this figure show "{text}"? Please answer yes or no.`` and the answer teacher-forced as
  "Yes" followed by the end of the turn; the score is exp(−mean cross-entropy) over those answer
  tokens, i.e. the geometric mean of P(Yes | prompt) and P(end | prompt, Yes).
* ``t2v-qwen2-vl``: t2v_metrics' HF-native Qwen2-VL scorer: ``Does this image show "{text}"?``
  and the next-token probability of the single id ``tokenizer.encode("Yes")[0]``.
* ``t2v-llava-onevision``: its HF-native LLaVA-OneVision scorer: the same rule after
  ``Does this image show "{text}"? Answer the question with Yes or No``.
* ``next-token`` (ours, for families t2v_metrics does not define): the LLaVA-1.5 question and the
  next-token P("Yes") + P(" Yes") (each counted when it is one token), the whole vocabulary's
  softmax, one forward per pair.

Default: the family's t2v_metrics rule where it has one (model types ``llava``, ``qwen2_vl``,
``llava_onevision``), so a number called VQAScore is the published metric of that checkpoint;
``next-token`` for every other family (no reference rule exists there; it is the rule the yes/no
oracle and the allowed-mass check read anyway).
"""

from __future__ import annotations

from dataclasses import dataclass

from conceptforge.errors import InvalidArgumentError

NEXT_TOKEN = "next-token"  # P("Yes") [+ P(" Yes")] as the next token
SINGLE_TOKEN = "single-token"  # P(tokenizer.encode("Yes")[0]) as the next token
TEACHER_FORCED = "teacher-forced"  # exp(mean log P) of "Yes" + end of turn

LLAVA_QUESTION = 'Does this figure show "{text}"? Please answer yes or no.'


@dataclass(frozen=True)
class VQAScoreVariant:
    """One way of turning (image, text) into a VQAScore: the question, the rule, the source."""

    name: str
    question: str
    rule: str
    source: str

    def describe(self) -> str:
        """The protocol line a result carries."""
        how = {
            NEXT_TOKEN: "P('Yes') as the next token",
            SINGLE_TOKEN: "P(tokenizer.encode('Yes')[0]) as the next token",
            TEACHER_FORCED: "exp(-mean CE) of the teacher-forced answer 'Yes' + end of turn",
        }[self.rule]
        return f"VQAScore ({self.name}, {self.source}): {how} after {self.question!r}"


VQASCORE_VARIANTS = {
    v.name: v
    for v in (
        VQAScoreVariant("t2v-llava-1.5", LLAVA_QUESTION, TEACHER_FORCED, "t2v_metrics' LLaVA-1.5 scorer"),
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
#: The family's t2v_metrics rule, by ``config.json``'s ``model_type``; every other type: next-token.
DEFAULT_VARIANT_BY_MODEL_TYPE = {
    "llava": "t2v-llava-1.5",
    "qwen2_vl": "t2v-qwen2-vl",
    "llava_onevision": "t2v-llava-onevision",
}


def vqascore_variant(name: str | None, *, model_type: str | None) -> VQAScoreVariant:
    """``name``, or the default of ``model_type`` when None (see the module docstring)."""
    if name is None:
        name = DEFAULT_VARIANT_BY_MODEL_TYPE.get(model_type or "", NEXT_TOKEN)
    if name not in VQASCORE_VARIANTS:
        raise InvalidArgumentError(f"VQAScore variant {name!r}: one of {', '.join(VQASCORE_VARIANTS)}")
    return VQASCORE_VARIANTS[name]
