"""The walk's minors (issue 45 item 10): each a one-line ``error:``, exit 2, nothing written.

Every expected line below is written by hand from what the user typed; none is copied from a
run. Datasets and models are the tiny ones of :mod:`conceptforge.testing`, built once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conceptforge.commands import main


def tree(path: Path) -> list[str]:
    """Every path under ``path`` (to show that a refused command wrote nothing)."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A binding dataset folder as `generate binding` assembles it (README.md, data/)."""
    from conceptforge.testing.synthetic import write_single_object

    return write_single_object(tmp_path_factory.mktemp("binding") / "single", n_per_label=1)


# -- R_T09, R_NO21, R_NO22: a dataset folder is not called "not a conceptforge run" --------------
@pytest.mark.parametrize("command", ["status", "assemble"])
def test_a_dataset_folder_given_as_a_run_is_called_a_dataset(dataset, capsys, command):
    before = tree(dataset)
    line = one_error_line(capsys, [command, str(dataset)])
    # by hand: the folder holds README.md and data/, which is what a dataset folder is
    assert line == (
        f"error: {dataset} is a dataset folder (README.md, data/), not a run: give the --out folder of the "
        "generate or filter run that made it (the folder holding .work/)"
    )
    assert tree(dataset) == before


def test_a_dataset_folder_as_out_is_refused_as_a_dataset(dataset):
    from conceptforge.errors import StoreError
    from conceptforge.output import RunDir, claim_folder

    expected = f"--out {dataset} already holds a dataset (README.md, data/); choose an empty or new folder"
    for attempt in (lambda: RunDir.open(str(dataset)), lambda: claim_folder(dataset, made_by="train-oracle")):
        with pytest.raises(StoreError) as caught:
            attempt()
        assert str(caught.value) == expected


def test_a_user_folder_with_a_readme_and_data_is_still_not_called_a_dataset(tmp_path):
    from conceptforge.errors import StoreError
    from conceptforge.output import RunDir

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.txt").write_text("mine\n")
    (tmp_path / "README.md").write_text("# my project\n")
    with pytest.raises(StoreError) as caught:
        RunDir.open(str(tmp_path))
    # by hand: no parquet shard in data/, so these are the user's files
    assert str(caught.value) == (
        f"--out {tmp_path} already holds files that are not a conceptforge run (README.md, data); "
        "choose an empty or new folder"
    )


# -- R_F08, R_EC8, R_NN03c, DF03: a mistyped local folder or an uncached model, in our words ------
def test_evaluate_with_a_mistyped_local_folder_says_no_such_local_folder(dataset, tmp_path, capsys):
    out = tmp_path / "results.json"
    argv = ["evaluate", "--model", "./clip-typo", "--tasks", "binding-clip", "--dataset", f"binding-clip={dataset}"]
    line = one_error_line(capsys, [*argv, "--output", str(out)])
    assert line == "error: --model: no such local folder ./clip-typo"  # by hand: what was typed
    assert not out.exists()


def test_evaluate_with_an_uncached_hub_id_offline_says_not_in_the_cache(dataset, tmp_path, capsys, hub_offline):
    out = tmp_path / "results.json"
    argv = ["evaluate", "--model", "org/never-downloaded", "--tasks", "binding-clip"]
    line = one_error_line(capsys, [*argv, "--dataset", f"binding-clip={dataset}", "--output", str(out)])
    assert line == (
        "error: --model: org/never-downloaded is not in the cache and HF_HUB_OFFLINE=1: "
        "download it where there is network (or unset HF_HUB_OFFLINE), or pass a local folder"
    )
    assert not out.exists()


def test_every_loader_names_a_mistyped_folder_the_same_way(tmp_path):
    from conceptforge.external_errors import weights_error

    missing = str(tmp_path / "typo")
    library_text = OSError(f"Incorrect path_or_model_id: '{missing}'. Please provide either the path to a local folder")
    assert (
        str(weights_error("classifier", missing, library_text))
        == f"cannot load classifier: no such local folder {missing}"
    )


# -- R_A03, R_A07: a binding dataset given to a SUB study -------------------------------------------
@pytest.mark.parametrize(
    "extra", [["--export", "results.json"], ["--apply", "annotated"], ["--port", "0"]], ids=["export", "apply", "serve"]
)
def test_annotating_a_binding_dataset_with_a_sub_study_says_the_study_is_for_sub(dataset, tmp_path, capsys, extra):
    before = tree(dataset)
    extra = [str(tmp_path / e) if not e.startswith("-") and e != "0" else e for e in extra]
    line = one_error_line(capsys, ["annotate", str(dataset), "--study", "sub-attribute", *extra])
    # by hand: SUB's columns (docs/schemas.md) that a binding dataset does not have
    assert line == (
        f"error: {dataset} is not a SUB dataset of conceptforge's schema (it lacks the columns bird, attribute, "
        "group, value, removed_attribute; see docs/schemas.md): study sub-attribute is for SUB datasets"
    )
    assert tree(dataset) == before and tree(tmp_path) == []
    assert not Path(f"{dataset}.annotations").exists()


# -- R_NS3c/d/e: an s3:// URL is not called a missing local folder -------------------------------
def test_an_object_store_url_gets_the_object_stores_words(s3_server, capsys):
    s3_server.make_bucket("walk-minors")
    # by hand: the bucket exists and holds nothing under run/; the second bucket was never made
    assert one_error_line(capsys, ["status", "s3://walk-minors/run"]) == (
        "error: s3://walk-minors/run: the object store has no object under this prefix in bucket walk-minors; "
        "check the URL"
    )
    assert one_error_line(capsys, ["assemble", "s3://no-such-bucket-here/run"]) == (
        "error: s3://no-such-bucket-here/run: bucket no-such-bucket-here does not exist at the object store "
        "(NoSuchBucket); check the URL"
    )
    assert s3_server.filesystem().ls("walk-minors") == []  # nothing written


def test_a_url_where_only_a_local_path_is_read_is_called_a_url(capsys):
    url = "s3://walk-minors/ds"
    assert one_error_line(capsys, ["export", url]) == (
        f"error: conceptforge export: argument DIR: {url} is a URL; this argument reads a local path only: "
        "copy it to a local folder first (see conceptforge export --help)"
    )
    assert one_error_line(capsys, ["verify", url]) == (
        f"error: {url} is a URL; a release is read from a local folder or a Hub id ORG/NAME[@REVISION]: "
        "copy it to a local folder first"
    )
    assert one_error_line(capsys, ["evaluate", "--model", url, "--tasks", "binding-clip"]) == (
        f"error: --model: {url} is a URL; models load from a local folder or a Hub id: copy it to a local folder first"
    )
    server = "http://127.0.0.1:9/v1"  # a server's address: the served-model spelling, not "copy it here"
    assert one_error_line(capsys, ["evaluate", "--model", server, "--tasks", "binding-clip"]) == (
        f"error: --model: {server} is a URL; a served model is endpoint:NAME@{server} (NAME: the model the server serves)"
    )


# -- R_NR14: `assemble OUT` on a read-only run folder is not told to "choose a writable --out" ------
def test_assemble_of_a_read_only_run_says_the_run_folder_must_be_writable(tmp_path, capsys):
    import os
    import subprocess
    import sys

    if os.geteuid() != 0:
        pytest.skip("a read-only mount needs root")
    mount = tmp_path / "ro"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        repo = Path(__file__).resolve().parents[2]
        stage = [sys.executable, str(repo / "tests" / "engine" / "engine_stage.py"), str(mount / "run"), "--count", "4"]
        made = subprocess.run(stage, env={**os.environ, "PYTHONPATH": str(repo)}, capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        before = tree(mount)
        line = one_error_line(capsys, ["assemble", str(mount / "run"), "--force"])
        # by hand: assemble has no --out to change; the folder given must be made writable
        assert line == (
            f"error: cannot write to output location {mount / 'run' / '.work'}: Read-only file system; "
            "the run folder must be writable (the dataset is written inside it): mount it read-write, then rerun"
        )
        assert tree(mount) == before
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


# -- Q36: nothing runs because --cub-dir is missing: say that, not "no task can run with the model" --
def test_a_missing_cub_dir_is_named_when_nothing_else_runs(tmp_path, capsys, tiny_clip_dir):
    from conceptforge.testing.synthetic import sub_rows, write_published_sub

    sub = write_published_sub(tmp_path / "sub", sub_rows(n_per_pair=1))
    out = tmp_path / "results.json"
    argv = ["evaluate", "--model", str(tiny_clip_dir), "--tasks", "sub-vlm,compmap-cub", "--dataset", f"sub-vlm={sub}"]
    assert main([*argv, "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # by hand: both tasks run with a CLIP model and read the CUB folder, which was not given
    assert err[-1] == "error: nothing to run: sub-vlm needs --cub-dir; compmap-cub needs --cub-dir"
    assert not any(line.startswith(("error:", "skipped:")) for line in err[:-1]), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"]  # nothing written beside the dataset


# -- NM4: a dataset folder whose name is not UTF-8 -------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [
        lambda d, tmp: ["export", d],
        lambda d, tmp: ["verify", d],
        lambda d, tmp: ["annotate", d, "--study", "sub-attribute", "--export", str(tmp / "r.json")],
        lambda d, tmp: ["evaluate", "--model", "CLIP", "--tasks", "binding-clip", "--dataset", f"binding-clip={d}"],
    ],
    ids=["export", "verify", "annotate", "evaluate"],
)
def test_a_dataset_folder_named_in_bytes_that_are_not_utf8_is_named_so(dataset, tmp_path, capsys, command, request):
    import os
    import shutil

    weird = os.fsdecode(os.fsencode(str(tmp_path)) + b"/ds-\xff")  # what the shell passes for $'ds-\xff'
    shutil.copytree(dataset, weird)
    before = tree(Path(weird))
    argv = command(weird, tmp_path)
    if "CLIP" in argv:  # evaluate reads the model first: a real one
        argv[argv.index("CLIP")] = str(request.getfixturevalue("tiny_clip_dir"))
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and [e for e in err if e.startswith("error:")] == [err[-1]], err
    line = err[-1]
    # by hand: the bytes shown as the shell gave them, and why the name matters
    assert line == (
        f"error: {tmp_path}/ds-\\xff is not valid UTF-8, and datasets and pyarrow read folders by UTF-8 names only: "
        "rename it (or link it under a UTF-8 name)"
    )
    assert tree(Path(weird)) == before and not (tmp_path / "r.json").exists()


# -- R_NF02, G15: values no run can have are refused, not turned into estimates ------------------
@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            ["generate", "binding", "--resolution", "99999x99999", "--dry-run"],
            "error: conceptforge generate binding: argument --resolution: width and height must be <= 8192 (CLEVR "
            "renders 320x240; 8192 px a side is already 67 megapixels an image), got '99999x99999' "
            "(see conceptforge generate binding --help)",
        ),
        (
            ["generate", "sub", "--resolution", "99984", "--dry-run"],
            "error: conceptforge generate sub: argument --resolution: must be <= 4096 (FLUX.1 makes images of up to "
            "about 2 megapixels; 4096 px is 16), got 99984 (see conceptforge generate sub --help)",
        ),
        (
            ["generate", "sub", "--seconds-per-image", "1" + "0" * 300, "--dry-run"],
            "error: conceptforge generate sub: argument --seconds-per-image: must be <= 86400 (one day; a measured "
            "time per image or step), got 1e+300 (see conceptforge generate sub --help)",
        ),
    ],
    ids=["binding-resolution", "sub-resolution", "gpu-hours"],
)
def test_values_no_run_can_have_are_refused(tmp_path, capsys, argv, expected):
    # by hand: 8192 * 8192 = 67.1e6 pixels; 99984 is a multiple of 16 above 4096; 1e300 s > one day (86400 s)
    assert one_error_line(capsys, [*argv, "--out", str(tmp_path / "out")]) == expected
    assert not (tmp_path / "out").exists()


# -- SY2: a symbolic link named as an output ------------------------------------------------------
def test_a_dangling_symlink_as_an_output_is_refused_and_kept(dataset, tmp_path, capsys):
    import os

    link = tmp_path / "results.json"
    os.symlink(tmp_path / "gone" / "results.json", link)
    argv = ["evaluate", "--model", "org/m", "--tasks", "binding-clip", "--dataset", f"binding-clip={dataset}"]
    line = one_error_line(capsys, [*argv, "--output", str(link)])
    # by hand: what the link points to, and that it does not exist
    assert line == (
        f"error: conceptforge evaluate: argument --output: {link} is a symbolic link to {tmp_path}/gone/results.json, "
        "which does not exist: remove the link or create its target (see conceptforge evaluate --help)"
    )
    assert link.is_symlink() and os.readlink(link) == str(tmp_path / "gone" / "results.json")


def test_the_output_guard_refuses_links_to_files_and_follows_links_to_folders(tmp_path):
    import os

    from conceptforge.errors import InvalidArgumentError
    from conceptforge.output import RunDir, claim_files, claim_folder

    (tmp_path / "mine.json").write_text("{}")
    os.symlink(tmp_path / "mine.json", tmp_path / "link.json")
    with pytest.raises(InvalidArgumentError) as caught:
        claim_files([tmp_path / "link.json"], ours=lambda path, head: True)
    assert str(caught.value) == (
        f"--output {tmp_path}/link.json is a symbolic link to the file {tmp_path}/mine.json: "
        "name that file itself, or remove the link"
    )
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    for claim in (
        lambda: claim_folder(tmp_path / "dangling", made_by="x"),
        lambda: RunDir.open(str(tmp_path / "dangling")),
    ):
        with pytest.raises(InvalidArgumentError, match=r"^--out .*/dangling is a symbolic link to .*/nowhere, which"):
            claim()
    (tmp_path / "scratch").mkdir()
    os.symlink(tmp_path / "scratch", tmp_path / "to-scratch")
    assert claim_folder(tmp_path / "to-scratch", made_by="x") == tmp_path / "to-scratch"  # a link to a folder: followed
    assert (tmp_path / "dangling").is_symlink() and (tmp_path / "link.json").is_symlink()


# -- R_F06: an output folder nested inside a dataset or a run ------------------------------------
def test_an_output_inside_a_dataset_or_a_run_store_is_refused(dataset, tmp_path):
    from conceptforge.errors import StoreError
    from conceptforge.output import RunDir, claim_folder

    before = tree(dataset)
    inside = dataset / "filtered"
    with pytest.raises(StoreError) as caught:
        RunDir.open(str(inside))
    # by hand: the dataset folder is the nearest parent holding README.md and data/*.parquet
    assert str(caught.value) == (
        f"--out {inside} is inside the dataset folder {dataset}, whose files it would become part of: "
        "choose a folder outside it"
    )
    store = tmp_path / "run" / ".work" / "oracle"
    with pytest.raises(StoreError) as caught:
        claim_folder(store, made_by="train-oracle")
    assert str(caught.value) == (
        f"--out {store} is inside the item store {tmp_path / 'run' / '.work'} of a run: choose a folder outside it"
    )
    assert tree(dataset) == before and not store.exists()
    assert RunDir.open(str(tmp_path / "beside")).out == str(tmp_path / "beside")  # beside it: fine


# -- DF03: an uncached default model offline is refused before the command writes anything --------
def test_filter_sub_with_its_uncached_default_vqa_model_offline_writes_nothing(tmp_path, capsys, hub_offline):
    from conceptforge.filters.vqa.scorer import DEFAULT_VQA_MODEL
    from conceptforge.testing.sub_inputs import make_candidates_dir
    from conceptforge.testing.synthetic import write_fake_cub

    candidates = make_candidates_dir(tmp_path / "candidates", per_pair=1)
    cub = write_fake_cub(tmp_path / "cub")
    out = tmp_path / "filtered"
    line = one_error_line(
        capsys, ["filter", "sub", "--candidates", str(candidates), "--cub-dir", str(cub), "--out", str(out)]
    )
    # by hand: the default VQA model, never downloaded into this test's empty cache
    assert line == (
        f"error: --vqa-model: {DEFAULT_VQA_MODEL} is not in the cache and HF_HUB_OFFLINE=1: download it where there "
        "is network (or unset HF_HUB_OFFLINE), or pass a local folder"
    )
    assert not out.exists()
