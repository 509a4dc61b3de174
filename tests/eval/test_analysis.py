"""The one hook from a finished evaluation to its breakdowns and charts (loaders/analysis.py)."""

from __future__ import annotations

import json

from conceptforge.commands import main

ANALYSIS = '''
import json
from pathlib import Path

CALLS = []


def write(results_path, samples_dir):
    CALLS.append((Path(results_path), Path(samples_dir)))
    tasks = [t["task"] for t in json.loads(Path(results_path).read_text())["tasks"]]
    out = Path(results_path).with_suffix(".analysis.txt")
    out.write_text(",".join(tasks) + ";" + ",".join(sorted(p.name for p in Path(samples_dir).glob("*.parquet"))))
    return [out]
'''


def test_no_analysis_installed_writes_nothing(tmp_path):
    from conceptforge.loaders import analysis

    assert all(__import__("importlib").util.find_spec(module) is None for _, module, _ in analysis.ANALYSES)
    (tmp_path / "x.samples").mkdir()
    assert analysis.write_breakdowns_and_charts(tmp_path / "x.json", tmp_path / "x.samples") == []
    assert analysis.write_breakdowns_and_charts(tmp_path / "x.json", None) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.samples"]


def test_each_run_and_each_rescoring_calls_the_analyses_once(tiny_clip_dir, single_object_dir, tmp_path, monkeypatch):
    from conceptforge.loaders import analysis

    (tmp_path / "my_analysis.py").write_text(ANALYSIS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_analysis

    monkeypatch.setattr(analysis, "ANALYSES", (("demo", "my_analysis", "write"),))
    out = tmp_path / "run.json"
    assert main(["evaluate", "--model", str(tiny_clip_dir), "--tasks", f"binding-clip:{single_object_dir}", "--device", "cpu",
                 "--cache-dir", str(tmp_path / "cache"), "--output", str(out)]) == 0
    assert my_analysis.CALLS == [(out, tmp_path / "run.samples")]
    assert (tmp_path / "run.analysis.txt").read_text() == "binding-clip;binding-clip.parquet"
    assert main(["evaluate", "--from-predictions", str(tmp_path / "run.samples"), "--output", str(tmp_path / "again.json")]) == 0
    assert my_analysis.CALLS[-1] == (tmp_path / "again.json", tmp_path / "again.samples")
    assert json.loads((tmp_path / "again.json").read_text()) == json.loads(out.read_text())
    # --no-samples: nothing to analyse, the hook writes nothing
    assert main(["evaluate", "--model", str(tiny_clip_dir), "--tasks", f"binding-clip:{single_object_dir}", "--device", "cpu",
                 "--cache-dir", str(tmp_path / "cache"), "--output", str(tmp_path / "bare.json"), "--no-samples"]) == 0
    assert len(my_analysis.CALLS) == 2 and not (tmp_path / "bare.analysis.txt").exists()
