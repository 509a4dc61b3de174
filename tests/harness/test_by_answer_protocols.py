"""The by-answer protocols (sub/choose-by-answer, binding/choose-by-answer) and ``answer-text`` of
local generative VLMs: greedy answers batched equal one-at-a-time ``generate`` calls a user would
write, the protocol numbers equal those worked out from the recorded answers, ``--from-predictions``
rebuilds the results byte for byte, and the leaderboard never mixes them with probability rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conceptforge.commands import main
from conceptforge.loaders.harness.by_answer import (
    ChoiceItem,
    binding_choice_items,
    parse_choice,
    render_choice_prompt,
    sub_choice_items,
)
from conceptforge.loaders.harness.model_ref import ModelRef


def _image(seed: int, size: int = 40):
    import numpy as np
    from PIL import Image

    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (size, size, 3), dtype=np.uint8))


def _hand_generate(model_dir: Path, image, text: str, max_new_tokens: int) -> str:
    """The one-at-a-time loop a user would write: processor, greedy ``generate``, decode."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir, backend="pil")
    model = AutoModelForImageTextToText.from_pretrained(model_dir).eval()
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = processor(images=image, text=prompt, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, do_sample=False, max_new_tokens=max_new_tokens)
    new = out[0, inputs["input_ids"].shape[1] :]
    return processor.tokenizer.decode(new, skip_special_tokens=True).strip()


def test_answer_text_batched_equals_one_at_a_time(tiny_llava_dir, tmp_path):
    from conceptforge.loaders.harness.adapters.base import load_adapter
    from conceptforge.loaders.harness.model_ref import resolve_model

    adapter = load_adapter(resolve_model(str(tiny_llava_dir)), device="cpu", dtype=None, cache_dir=str(tmp_path))
    items = [
        ChoiceItem("0", _image(1), "What type of crown color does this bird have?", ("blue", "black", "Other"), 1, "c"),
        ChoiceItem("1", _image(2, size=48), "Which caption describes the image?", ("red cube", "blue cube"), 0, "k"),
        ChoiceItem("2", _image(3), "Which?", ("a", "b", "c", "d"), 3, "k"),
    ]
    images, prompts = [i.image for i in items], [render_choice_prompt(i) for i in items]
    batched = adapter.answer_text(images, prompts, max_new_tokens=6, batch_size=3)  # prompts of 3 lengths: padded
    single = [adapter.answer_text([i], [p], max_new_tokens=6, batch_size=1)[0] for i, p in zip(images, prompts)]
    assert batched == single
    assert batched == [_hand_generate(tiny_llava_dir, i, p, 6) for i, p in zip(images, prompts)]
    assert all(isinstance(a, str) for a in batched)
    adapter.close()


# ----------------------------------------------------------------------------------- scripted answers
class ScriptedAnswerer:
    """A model double answering from a script keyed by (image content, prompt), to check the
    protocols' numbers by hand; it counts what it was asked."""

    model_id = "scripted"
    revision = "r1"

    def __init__(self, script: dict[tuple[str, str], str]) -> None:
        self.script = script
        self.asked: list[str] = []

    def answer_text(self, images, prompts, *, max_new_tokens=16, batch_size=8):
        self.asked += list(prompts)
        return [self.script[_key(image, prompt)] for image, prompt in zip(images, prompts)]

    def close(self) -> None:
        pass


def _key(image, prompt: str) -> tuple[str, str]:
    from conceptforge.loaders.harness.embeddings import image_key

    return image_key(image), prompt


def _session(answerer):
    from conceptforge.loaders.harness.runner import ModelSession

    ref = ModelRef("org/vlm", "vlm", "hub", None, "c" * 40, "llava")
    session = ModelSession(ref, device="cpu", dtype=None, cache_dir=None)
    session._adapter = answerer  # the family's adapter, loaded: here the script
    return session


def _scripted(questions, answer_of_kind, kinds: int) -> tuple[dict, list[int]]:
    """The script (one answer per distinct image and prompt, by the kind of the first question
    asking it) and each question's kind."""
    script: dict[tuple[str, str], str] = {}
    kind_of: dict[tuple[str, str], int] = {}
    for n, q in enumerate(questions):
        key = _key(q.image, render_choice_prompt(q))
        if key not in script:
            kind_of[key] = n % kinds
            script[key] = answer_of_kind(q, n % kinds)
    return script, [kind_of[_key(q.image, render_choice_prompt(q))] for q in questions]


def test_sub_choose_by_answer_numbers_by_hand(sub_dir, fake_cub, tmp_path):
    from conceptforge.cub import load_cub
    from conceptforge.loaders.harness.runner import run_task
    from conceptforge.loaders.sub.protocol import load_sub

    cub = load_cub(fake_cub, need="votes")
    items = load_sub(str(sub_dir), split="test", cub=cub)
    questions = list(sub_choice_items(items, cub.groups))
    # by kind: the right letter by phrase, "Other", option A by marker and text, nothing readable
    answers = {0: lambda q: f"The answer is {q.answer_letter}.", 1: lambda q: "Other"}
    answers |= {2: lambda q: "(A) " + q.options[0], 3: lambda q: "I cannot see a bird."}
    script, kinds = _scripted(questions, lambda q, k: answers[k](q), 4)
    answerer = ScriptedAnswerer(script)
    outcome = run_task(
        "sub-vlm",
        model=_session(answerer),
        dataset=str(sub_dir),
        cub_dir=fake_cub,
        options={"by_answer": "true", "cbm_min_classes": 1},
        batch_size=3,
        sample_cache=False,
    )
    assert outcome.protocol == "sub/choose-by-answer"
    assert len(answerer.asked) == len(items)
    # by hand: S+ right for kind 0, and for kind 2 when the attribute is its group's first value
    plus = [k == 0 or (k == 2 and q.answer_index == 0) for k, q in zip(kinds, questions)]
    assert outcome.metrics["s_plus"].value == pytest.approx(sum(plus) / len(plus))
    assert outcome.metrics["unparsed_answers"].value == kinds.count(3)
    assert outcome.metrics["unparsed_answers"].n == len(items)
    rows = {r["item_id"]: r for r in outcome.samples}
    for n, (k, q) in enumerate(zip(kinds, questions)):
        row = rows[f"{n}/S+"]
        assert row["answer"] == answers[k](q)
        assert row["parsed"] is (k != 3)
        assert row["parsed_answer"] == [q.answer_letter, q.letters[-1], "A", None][k]
        minus = rows.get(f"{n}/S-")
        if minus is not None:  # S-: "that attribute" not chosen; an unparsed answer is wrong
            chosen = {0: q.option_keys[q.answer_index], 1: "none", 2: q.option_keys[0], 3: None}[k]
            assert minus["correct"] is (chosen is not None and chosen not in minus["label"].split(";"))
    assert any(f"{n}/S-" in rows and k == 3 for n, k in enumerate(kinds))  # an unparsed S- row was scored


def test_binding_choose_by_answer_numbers_by_hand(single_object_dir, tmp_path):
    from conceptforge.loaders.binding.data import load_binding
    from conceptforge.loaders.harness.runner import run_task

    splits = {name: split for name, split in load_binding(str(single_object_dir)).items() if len(split)}
    questions = list(binding_choice_items(splits))

    def answer(q: ChoiceItem, kind: int) -> str:
        wrong = (q.answer_index + 1) % len(q.options)
        return [q.options[q.answer_index], f"{q.letters[wrong]}.", "hmm"][kind]  # right words, wrong letter, none

    script, kinds = _scripted(questions, answer, 3)
    outcome = run_task(
        "binding-clip",
        model=_session(ScriptedAnswerer(script)),
        dataset=str(single_object_dir),
        options={"by_answer": "true"},
        sample_cache=False,
    )
    assert outcome.protocol == "binding/choose-by-answer"
    kind = {q.item_id: k for q, k in zip(questions, kinds)}
    gen = [q.item_id for q in questions if q.item_id.startswith("gen/")]
    assert outcome.metrics["gen_accuracy"].value == pytest.approx(sum(kind[i] == 0 for i in gen) / len(gen))
    assert outcome.metrics["unparsed_answers"].value == kinds.count(2)
    for row in outcome.samples:
        assert row["correct"] is (kind[row["item_id"]] == 0) and row["value"] == float(kind[row["item_id"]] == 0)
        if not row["parsed"]:
            assert row["prediction"] == "(unparsed)" and row["scores"][row["label_index"]] == 0.0


def test_by_answer_is_refused_for_a_model_that_does_not_answer_in_words(tiny_clip_dir, single_object_dir, capsys):
    argv = ["evaluate", "--model", str(tiny_clip_dir), "--tasks", f"binding-clip:{single_object_dir}"]
    assert main([*argv, "--task-option", "binding-clip.by_answer=true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not answer in words" in err[0]


# ----------------------------------------------------------------------------------- end to end
def _letter_llava(source: Path, path: Path) -> Path:
    """The tiny LLaVA made to answer in one option letter: its output head scores only "C" (+)
    and "D" (−) along one hidden dimension, and both end the generation (the model's own
    ``generation_config``), so every answer is "C" or "D" — parsed, right or wrong by the data."""
    import shutil

    import torch
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    shutil.copytree(source, path)
    model = AutoModelForImageTextToText.from_pretrained(source)
    tokenizer = AutoTokenizer.from_pretrained(source)
    c, d = tokenizer.convert_tokens_to_ids("C"), tokenizer.convert_tokens_to_ids("D")
    with torch.no_grad():
        head = model.get_output_embeddings().weight
        head.zero_()
        head[c, 0], head[d, 0] = 1.0, -1.0
    model.generation_config.eos_token_id = [c, d]
    model.save_pretrained(path)
    return path


def test_tiny_vlm_by_answer_end_to_end_and_rescored(tiny_llava_dir, single_object_dir, sub_dir, fake_cub, tmp_path):
    import pyarrow.parquet as pq

    from conceptforge.cub import load_cub
    from conceptforge.loaders.sub.protocol import load_sub

    letters_llava = _letter_llava(tiny_llava_dir, tmp_path / "letters-llava")
    out = tmp_path / "llava.json"
    argv = [
        "evaluate",
        "--model",
        str(letters_llava),
        "--tasks",
        f"binding-clip:{single_object_dir},sub-vlm:{sub_dir}",
    ]
    argv += ["--cub-dir", str(fake_cub), "--task-option", "sub-vlm.cbm_min_classes=1", "--batch-size", "8"]
    argv += ["--task-option", "sub-vlm.by_answer=true", "--task-option", "binding-clip.by_answer=true"]
    argv += ["--device", "cpu", "--cache-dir", str(tmp_path / "cache"), "--output", str(out)]
    assert main(argv) == 0
    binding, sub = json.loads(out.read_text())["tasks"]
    assert binding["protocol"] == "binding/choose-by-answer" and sub["protocol"] == "sub/choose-by-answer"
    # the numbers from the recorded answers: S+ = the parsed letter's attribute is the label
    cub = load_cub(fake_cub, need="votes")
    questions = list(sub_choice_items(load_sub(str(sub_dir), split="test", cub=cub), cub.groups))
    rows = pq.read_table(tmp_path / "llava.samples" / "sub-vlm.parquet").to_pylist()
    plus = [r for r in rows if r["side"] == "S+"]
    hits = 0
    for r in plus:
        q = questions[int(r["item_id"].split("/")[0])]
        letter = parse_choice(r["answer"], q.letters, q.options)
        assert r["parsed_answer"] == letter and r["parsed"] is (letter is not None)
        hits += letter == q.answer_letter
    assert sub["metrics"]["s_plus"]["value"] == hits / len(plus)
    assert sub["metrics"]["unparsed_answers"]["value"] == sum(not r["parsed"] for r in plus)
    assert {r["answer"] for r in rows} <= {"C", "D"} and any(r["parsed"] for r in rows)
    matched = pq.read_table(tmp_path / "llava.samples" / "binding-clip.parquet").to_pylist()
    gen = [r for r in matched if r["split"] == "gen"]
    expected = sum(
        parse_choice(r["answer"], "ABCDE"[: len(r["candidates"])], r["candidates"]) == "ABCDE"[r["label_index"]]
        for r in gen
    )
    assert binding["metrics"]["gen_accuracy"]["value"] == pytest.approx(expected / len(gen))
    # by hand: every answer is "C" or "D", so an image is right when its true caption is third or fourth
    assert expected == sum(r["answer"] == "ABCDE"[r["label_index"]] for r in gen)
    assert all(r["parsed"] and r["prediction"] == r["candidates"]["ABCDE".index(r["answer"])] for r in matched)
    samples = out.with_name(out.stem + ".samples")
    again = tmp_path / "again.json"
    assert main(["evaluate", "--from-predictions", str(samples), "--output", str(again)]) == 0
    assert again.read_text() == out.read_text()

    # a row whose parsed letter does not follow from its answer is refused, one line
    import pyarrow as pa

    table = pq.read_table(samples / "binding-clip.parquet")
    edited = table.to_pylist()
    edited[0]["parsed_answer"] = "E" if edited[0]["parsed_answer"] != "E" else "D"
    tampered = tmp_path / "tampered"
    tampered.mkdir()
    pq.write_table(pa.Table.from_pylist(edited, schema=table.schema), tampered / "binding-clip.parquet")
    assert main(["evaluate", "--from-predictions", str(tampered), "--output", str(tmp_path / "t.json")]) == 2
    assert not (tmp_path / "t.json").exists()


def test_leaderboard_keeps_a_probability_and_a_by_answer_row_of_one_task_apart():
    from conceptforge.loaders.analysis.leaderboard import leaderboard_table
    from conceptforge.loaders.harness.runner import RESULTS_FORMAT

    def payload(protocol: str, value: float) -> dict:
        task = {
            "task": "sub-vlm",
            "main_metric": "s_plus",
            "metrics": {"s_plus": {"value": value, "stderr": None, "n": 10}},
            "dataset": {"repo": "Jessica-bader/SUB", "sha": "a" * 40, "config": None},
            "protocol": protocol,
            "variant": "same words",  # even with one variant text, the protocols stay two columns
        }
        return {"format": RESULTS_FORMAT, "model": {"id": "org/vlm", "kind": "vlm", "sha": "b" * 40}, "tasks": [task]}

    headers, rows, notes = leaderboard_table([payload("sub/vlm-choose", 0.5), payload("sub/choose-by-answer", 0.25)])
    assert headers[3:] == ["sub-vlm s_plus <sub/vlm-choose> (%)", "sub-vlm s_plus <sub/choose-by-answer> (%)"]
    assert rows[0][3:] == ["50.00", "–"] and rows[1][3:] == ["–", "25.00"]
    assert len(notes) == 2


def test_the_by_answer_option_picks_answer_text_and_the_default_stays_probabilities():
    from conceptforge.loaders.harness.registry import all_tasks, format_task_list

    tasks = all_tasks()
    for name, default in (("sub-vlm", "choose"), ("binding-clip", "match")):
        assert tasks[name].capability_for("vlm") == default  # the probability protocol, unchanged
        assert tasks[name].capability_for("vlm", {"by_answer": True}) == "answer-text"
        assert tasks[name].capability_for("clip", {"by_answer": True}) is None  # refused by check_options
    listed = format_task_list()
    assert "| sub-vlm " in listed and "vlm (by_answer=true)" in listed and "sub/choose-by-answer" in listed
