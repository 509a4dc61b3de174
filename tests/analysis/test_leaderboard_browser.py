"""The ``conceptforge leaderboard --html`` page in a real headless Chromium (Playwright): opened from
disk with no server, every table and embedded chart renders, nothing is fetched from anywhere.

A full-page screenshot is written to the test's tmp dir, and also to ``$LEADERBOARD_SCREENSHOT_DIR``
when set (to look at it).
"""

from __future__ import annotations

from pathlib import Path

from conceptforge.commands import main
from tests.analysis.sample_files import write_results, write_samples
from tests.browser import keep_screenshot, needs_chromium

pytestmark = needs_chromium
TASKS = {"binding-clip": "gen_accuracy", "compmap-cub": "5-way-1-shot.prim", "conceptbed-ccd": "composition.ccd"}


def write_run(folder: Path, model: str, skill: float) -> Path:
    """A results file and its per-sample files; both models score the same items (so they pair)."""
    samples = folder / f"{model}.samples"
    binding = [
        {
            "item_id": f"{split}{k}",
            "split": split,
            "dataset": "relational",
            "relation": ["left of", "above"][k % 2],
            "swap_kind": ["hard-swap", "random"][k // 2 % 2],
            "value": float((k * 7 + int(10 * skill)) % 10 < 10 * skill),
        }
        for split in ("train", "gen")
        for k in range(12)
    ]
    write_samples(samples, "binding-clip", binding, model=model)
    cub = [
        {
            "item_id": f"{n}-way-1-shot/{row}/{e}",
            "n_way": n,
            "k_shot": 1,
            "episode": e,
            "setting": f"{n}-way-1-shot",
            "row": row,
            "value": min(1.0, skill - n / 40 + e / 50 + (0.2 if row == "oracle" else 0)),
        }
        for n in (5, 10)
        for row in ("prim", "oracle")
        for e in range(8)
    ]
    write_samples(samples, "compmap-cub", cub, model=model)
    ccd = [
        {
            "item_id": f"learner/composition/{c}-{k}",
            "source": "learner",
            "oracle_task": "composition",
            "concept": c,
            "concept_category": ["action", "counting", "action;counting"][k % 3],
            "value": (k % 3) / 10 - skill / 5,
        }
        for c in ("fish", "painting")
        for k in range(6)
    ]
    write_samples(samples, "conceptbed-ccd", ccd, model=model)
    return write_results(folder / f"{model}.json", model, TASKS)


def test_leaderboard_page_renders_tables_charts_and_paired_differences(tmp_path, browser, capsys):
    runs = [write_run(tmp_path / "results", "tiny-clip-a", 0.8), write_run(tmp_path / "results", "tiny-clip-b", 0.5)]
    page_path = tmp_path / "leaderboard.html"
    assert main(["leaderboard", *map(str, runs), "--html", str(page_path), "--bootstrap-resamples", "200"]) == 0
    capsys.readouterr()

    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on(
        "request",
        lambda request: None if request.url.startswith(("file://", "data:")) else problems.append(request.url),
    )
    page.goto(page_path.as_uri())
    page.wait_for_load_state("load")

    images = page.evaluate(
        "() => Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth, i.naturalHeight])"
    )
    # per task: the breakdown chart and one paired-difference chart (two models share every item)
    data = "data @local:0123456"  # every section names the dataset it shows (repo, config, commit)
    assert [alt for alt, *_ in images] == [
        alt for task in TASKS for alt in (f"{task} breakdowns on {data}", f"{task}: tiny-clip-a minus tiny-clip-b")
    ]
    assert all(complete and width > 400 and height > 100 for _, complete, width, height in images), images
    sections = page.eval_on_selector_all("section.task h2", "nodes => nodes.map(n => n.textContent)")
    assert sections == [f"{task} on {data}" for task in TASKS]
    first_row = page.eval_on_selector_all("#headline tbody tr", "rows => rows.map(r => r.cells[0].textContent)")
    assert first_row == ["tiny-clip-a", "tiny-clip-b"]
    assert page.locator("section.task table").count() == 2 * len(TASKS)  # breakdown table + difference table per task
    difference_rows = page.locator("#task-binding-clip table").nth(1).locator("tbody tr")
    assert difference_rows.first.inner_text().startswith("overall")
    assert page.locator("#task-conceptbed-ccd").inner_text().count("by concept category: action") == 2
    assert problems == []

    shot = tmp_path / "leaderboard.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 50_000
    keep_screenshot(shot, "LEADERBOARD_SCREENSHOT_DIR")
    context.close()
