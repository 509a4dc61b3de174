"""End to end in a real headless Chromium driven by Playwright: keyboard answers, reload and resume,
two annotators at once, then the exported scores and the filtered dataset match the answers given.

Screenshots of every study page are written to the test's tmp dir, and also to
``$ANNOTATE_SCREENSHOT_DIR`` when set (that is how docs/img/annotate-*.png are made).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from conceptforge.filters.annotation.apply import apply_results
from conceptforge.filters.annotation.results import Rules
from conceptforge.filters.annotation.session import export_results
from conceptforge.filters.annotation.studies import ANSWER_SCORES
from tests.browser import keep_screenshot, needs_chromium

pytestmark = needs_chromium


def new_page(browser, url: str):
    context = browser.new_context(viewport={"width": 1200, "height": 860})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("requestfailed", lambda request: errors.append(f"failed request {request.url}"))
    page.goto(url)
    page._annotate_errors = errors  # checked by the tests
    return page


def current_item(page) -> str | None:
    page.wait_for_function(
        "() => !document.getElementById('task').hidden || !document.getElementById('finished').hidden"
    )
    if not page.locator("#finished").is_hidden():
        return None
    page.wait_for_function(
        "() => document.getElementById('image').complete && document.getElementById('image').naturalWidth > 0"
    )
    return page.get_attribute("#task", "data-item-id")


def answer(page, keys: list[str]) -> None:
    """Press ``keys`` then Enter, and wait until the page shows another item (or the end)."""
    before = current_item(page)
    for key in keys:
        page.keyboard.press(key)
    page.keyboard.press("Enter")
    page.wait_for_function(
        "(before) => document.getElementById('task').dataset.itemId !== before || !document.getElementById('finished').hidden",
        arg=before,
    )


def progress_text(page) -> str:
    return page.inner_text("#progress-text")


def save_screenshot(page, tmp_path: Path, study: str) -> Path:
    path = tmp_path / f"annotate-{study}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 5_000
    keep_screenshot(path, "ANNOTATE_SCREENSHOT_DIR")
    return path


# --------------------------------------------------------------------------------------------
def faithfulness_answers(annotator: str, row: dict) -> tuple[str, str]:
    """The answers our two simulated annotators give (designed to trigger every SUB rule)."""
    attribute = (
        "no" if (row["value"] == "needle" and annotator == "alice" and row["item_id"].endswith("__000")) else "yes"
    )
    bird = "yes"
    if row["bird"] == "Blue_Jay" and row["value"] == "black":
        bird = "somewhat" if annotator == "alice" else "no"
    return attribute, bird


@pytest.mark.heavy
def test_sub_faithfulness_keyboard_resume_two_annotators(browser, serve_study, make_sub, tmp_path):
    dataset = make_sub(tmp_path / "sub-small", per_pair=2)
    running = serve_study(dataset, "sub-faithfulness", per_group=4)  # 3 attributes x 4 = every image
    rows = running.app.dataset.rows
    total = len(running.app.sample)
    assert total == 12
    alice = new_page(browser, running.url + "?annotator=alice")
    bob = new_page(browser, running.url + "?annotator=bob")
    given: dict[str, dict[str, tuple[str, str]]] = {"alice": {}, "bob": {}}

    def step(page, name: str, *, correct_with_backspace: bool = False) -> None:
        item_id = current_item(page)
        assert item_id not in given[name], f"{name} saw {item_id} twice"
        attribute, bird = faithfulness_answers(name, rows[item_id])
        keys = [attribute[0], bird[0]]
        if correct_with_backspace:  # a wrong key, undone with Backspace
            keys = [attribute[0], "n" if bird != "no" else "y", "Backspace", bird[0]]
        answer(page, keys)
        given[name][item_id] = (attribute, bird)

    for index in range(5):  # interleaved: two annotators at work at the same time
        step(alice, "alice", correct_with_backspace=index == 1)
        step(bob, "bob")
    assert progress_text(alice).startswith("5 done · 7 remaining")
    alice.reload()  # resume mid-study: nothing answered is shown again
    assert current_item(alice) not in given["alice"]
    assert progress_text(alice).startswith("5 done · 7 remaining")
    while current_item(alice) is not None:
        step(alice, "alice")
    while current_item(bob) is not None:
        step(bob, "bob")
    assert alice.inner_text("#finished-text").startswith("alice answered all 12")
    assert progress_text(bob).startswith("12 done · 0 remaining")
    assert set(given["alice"]) == set(given["bob"]) == set(running.app.sample)
    assert not alice._annotate_errors and not bob._annotate_errors

    # Stored answers are exactly the ones given.
    stored = {
        (a.annotator, a.item_id): (a.answers["attribute"], a.answers["bird"]) for a in running.app.db.annotations()
    }
    assert stored == {(name, item): value for name, items in given.items() for item, value in items.items()}

    # Scores recomputed here by hand from the answers given.
    results = export_results(running.app, running.app.db.config(), rules=Rules(), metric_specs=[])
    by_attribute = defaultdict(list)
    for items in given.values():
        for item_id, (attribute, bird) in items.items():
            by_attribute[rows[item_id]["attribute"]].append((attribute, bird))
    for attribute, answers in by_attribute.items():
        got = results["attributes"][attribute]
        assert got["attribute_score"] == pytest.approx(sum(ANSWER_SCORES[a] for a, _ in answers) / len(answers))
        assert got["attribute_yes"] == pytest.approx(sum(a == "yes" for a, _ in answers) / len(answers))
        assert got["bird_score"] == pytest.approx(sum(ANSWER_SCORES[b] for _, b in answers) / len(answers))
    assert results["attributes"]["has_bill_shape::needle"]["attribute_yes"] == pytest.approx(
        6 / 8
    )  # alice: "no" on image 000 of both birds
    assert set(results["dropped_attributes"]) == {"has_bill_shape::needle"}
    assert results["pairs"]["Blue_Jay|has_crown_color::black"]["bird_score"] == pytest.approx(0.25)
    assert results["dropped_pairs"]["Blue_Jay|has_crown_color::black"].startswith("excessive modification")
    assert "S+ = S-" in results["dropped_pairs"]["Cardinal|has_crown_color::red"]
    assert sorted(results["kept_pairs"]) == ["Blue_Jay|has_crown_color::red", "Cardinal|has_crown_color::black"]
    assert results["agreement"]["attribute"]["items_with_2plus_annotators"] == 12

    # The filtered dataset holds exactly the kept pairs, with the human scores per image.
    import datasets

    out = tmp_path / "validated"
    apply_results(results, dataset_dir=dataset, out_dir=out)
    validated = datasets.load_dataset(str(out), split="test")
    assert sorted({f"{r['bird']}|{r['attribute']}" for r in validated}) == results["kept_pairs"]
    assert len(validated) == 4
    for row in validated:
        pairs = [given[n][row["item_id"]] for n in ("alice", "bob")]
        assert row["human_faithfulness_n"] == 2
        assert row["human_faithfulness_bird"] == pytest.approx(sum(ANSWER_SCORES[b] for _, b in pairs) / 2)
    card = (out / "README.md").read_text()
    assert "human-validated" in card and "excessive modification" in card


def test_login_form_then_annotate(browser, sub_dataset, serve_study):
    running = serve_study(sub_dataset, "sub-faithfulness", per_group=1)
    page = new_page(browser, running.url)
    page.wait_for_selector("#login:not([hidden])")
    page.fill("#annotator-input", "carol")
    page.keyboard.press("Enter")
    assert current_item(page) is not None
    assert page.inner_text("#who") == "annotator: carol"
    assert "annotator=carol" in page.url
    answer(page, ["y", "y"])
    assert running.app.db.annotators() == {"carol": 1}


@pytest.mark.parametrize(
    "study", ["sub-faithfulness", "sub-attribute", "conceptbed-alignment", "conceptbed-composition"]
)
def test_study_page_keyboard_and_screenshot(browser, study, sub_dataset, conceptbed_dataset, serve_study, tmp_path):
    dataset = conceptbed_dataset if study.startswith("conceptbed") else sub_dataset
    running = serve_study(dataset, study, per_group=1)
    page = new_page(browser, running.url + "?annotator=dana")
    item_id = current_item(page)
    row = running.app.dataset.rows[item_id]
    if study == "sub-faithfulness":
        keys, expected = ["s", "y"], {"attribute": "somewhat", "bird": "yes"}
        assert row["bird"].replace("_", " ") in page.inner_text("#questions")
    elif study == "sub-attribute":
        options = page.locator(".options button")
        group_values = running.app.group_values[row["group"]]
        assert options.count() == len(group_values) + 1  # every value of the group, plus none
        assert row["bird"].replace("_", " ") not in page.inner_text("body")  # no hint of the answer
        correct = page.locator(f'.options button[data-value="{row["value"]}"] kbd').inner_text()
        keys, expected = [correct], {"value": row["value"]}
    elif study == "conceptbed-alignment":
        assert page.locator("#references img").count() == 3
        page.wait_for_function(
            "() => [...document.querySelectorAll('#references img')].every(i => i.complete && i.naturalWidth > 0)"
        )
        keys, expected = ["4"], {"rating": 4}
    else:
        assert page.inner_text("#caption").strip("“”") == row["caption"]
        keys, expected = ["2"], {"rating": 2}
    for key in keys:  # answered but not yet submitted: what the screenshot shows
        page.keyboard.press(key)
    assert page.locator("#submit").is_enabled()
    save_screenshot(page, tmp_path, study)
    page.keyboard.press("Enter")
    page.wait_for_function("(before) => document.getElementById('task').dataset.itemId !== before", arg=item_id)
    stored = {a.item_id: a.answers for a in running.app.db.annotations()}
    assert stored == {item_id: expected}
    assert progress_text(page).startswith("1 done")
    assert not page._annotate_errors
