"""The one progress switch: environment variable, functions, and no bars in log files."""

import io
import logging

import pytest

import conceptforge
from conceptforge import progress
from conceptforge.progress import ENV_VAR, tqdm


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


@pytest.fixture(autouse=True)
def _clean_switch(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setattr(progress, "_switch", None)


def test_default_follows_whether_stderr_is_a_terminal(monkeypatch):
    monkeypatch.setattr("sys.stderr", _Stream(tty=True))
    assert not conceptforge.are_progress_bars_disabled()
    monkeypatch.setattr("sys.stderr", _Stream(tty=False))  # a log file, a pipe, a batch job
    assert conceptforge.are_progress_bars_disabled()


def test_functions_override_the_terminal_check(monkeypatch):
    monkeypatch.setattr("sys.stderr", _Stream(tty=False))
    conceptforge.enable_progress_bars()
    assert not conceptforge.are_progress_bars_disabled()
    monkeypatch.setattr("sys.stderr", _Stream(tty=True))
    conceptforge.disable_progress_bars()
    assert conceptforge.are_progress_bars_disabled()


@pytest.mark.parametrize(
    "value, disabled", [("1", True), ("true", True), ("YES", True), ("0", False), ("false", False)]
)
def test_environment_variable_wins_over_code(monkeypatch, value, disabled):
    monkeypatch.setattr("sys.stderr", _Stream(tty=not disabled))
    monkeypatch.setenv(ENV_VAR, value)
    conceptforge.enable_progress_bars() if disabled else conceptforge.disable_progress_bars()
    assert conceptforge.are_progress_bars_disabled() is disabled


def test_enabled_bar_draws_and_disabled_bar_writes_nothing():
    conceptforge.enable_progress_bars()
    shown = io.StringIO()
    for _ in tqdm(range(5), desc="work", file=shown, mininterval=0):
        pass
    assert "work" in shown.getvalue() and "\r" in shown.getvalue() and "5/5" in shown.getvalue()

    conceptforge.disable_progress_bars()
    hidden = io.StringIO()
    with tqdm(total=5, desc="work", file=hidden) as bar:
        for _ in range(5):
            bar.update(1)
    assert hidden.getvalue() == ""


def test_disabled_bar_logs_plain_progress_lines(caplog):
    conceptforge.disable_progress_bars()
    with caplog.at_level(logging.INFO, logger="conceptforge.progress"):
        items = list(tqdm(range(4), desc="VQA scoring", unit="img", log_interval=0))
    assert items == [0, 1, 2, 3]
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("VQA scoring: 1/4 img (25%)")
    assert lines[3].startswith("VQA scoring: 4/4 img (100%)")
    assert lines[-1].startswith("VQA scoring: done, 4/4 img (100%)")
    assert all("\r" not in line for line in lines)


def test_quiet_loop_logs_nothing(caplog):
    conceptforge.disable_progress_bars()
    with caplog.at_level(logging.INFO, logger="conceptforge.progress"):
        list(tqdm(range(3), desc="quiet", disable=True, log_interval=0))
        list(tqdm(range(3), desc="short"))  # shorter than the log interval: no line at all
    assert caplog.records == []


def test_library_loop_obeys_the_switch(tmp_path, capsys):
    """The run engine's loop (used by every generator) draws only when the switch allows it."""
    from conceptforge import ItemResult, ItemStore, WorkItem, run_work_items

    items = [WorkItem(item_id=f"i{n}", seed=n, split="train") for n in range(3)]

    def make(item):
        return ItemResult(files={"txt": item.item_id.encode()}, metadata={})

    conceptforge.enable_progress_bars()
    run_work_items(items, make, ItemStore(tmp_path / "a"), description="things")
    assert "things" in capsys.readouterr().err
    conceptforge.disable_progress_bars()
    run_work_items(items, make, ItemStore(tmp_path / "b"), description="things")
    assert "\r" not in capsys.readouterr().err


def test_diffusers_loading_bar_follows_the_switch(tmp_path, capsys, monkeypatch):
    """diffusers' "Loading pipeline components..." bar wrote \\r frames into logs with bars off."""
    diffusers = pytest.importorskip("diffusers")
    from diffusers.utils import logging as diffusers_logging

    from conceptforge.testing.tiny_conceptbed import build_tiny_sd

    folder = build_tiny_sd(tmp_path / "sd")
    monkeypatch.setenv(ENV_VAR, "1")
    capsys.readouterr()
    try:
        progress.quiet_model_library_bars()
        pipeline = diffusers.StableDiffusionPipeline.from_pretrained(
            folder, safety_checker=None, requires_safety_checker=False
        )
        progress.quiet_model_library_bars(pipeline)
        err = capsys.readouterr().err
        assert "Loading pipeline components" not in err and "\r" not in err
        assert not diffusers_logging.is_progress_bar_enabled()
        assert pipeline._progress_bar_config == {"disable": True}
    finally:
        diffusers_logging.enable_progress_bar()
