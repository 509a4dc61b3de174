"""Question text shown to annotators."""

from conceptforge.filters.annotation.studies import display_fields, get_study


def test_attribute_question_reads_as_english():
    study = get_study("sub-faithfulness")
    fields = display_fields(study, {"attribute": "has_tail_pattern::solid", "bird": "Blue_Jay"})
    question = next(q for q in study.questions if q.id == "attribute")
    assert question.text.format(**fields) == "Does this bird have a solid tail pattern?"
    orange = display_fields(study, {"attribute": "has_breast_color::orange", "bird": "Blue_Jay"})
    assert orange["attribute_text"].startswith("an orange ")
