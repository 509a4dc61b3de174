"""``conceptforge status OUT``: per shard, which chunks and items are done and which are left.

Reads only (never writes: a read-only folder or bucket works): the store's listing, small JSON
files and, for an assembled run, the published files, whose sizes and sha256 are checked against
the assembly's manifest (what is missing or changed is named). The shard count is the one the
last processes ran with (``--num-shards`` to ask about another). For a run made by a Slurm job
array it also prints the ``sbatch --array=...`` line that resubmits exactly the missing tasks,
and it tells a shard whose process is gone from one that is still running.
"""

from __future__ import annotations

import argparse

from conceptforge import argtypes as at


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", type=at.existing_location, help="the run's --out folder or URL")
    parser.add_argument(
        "--num-shards", type=at.positive_int, default=None, help="report for this many shards (default: as last run)"
    )


def _sub_runs(store) -> list[str]:
    """Names of the runs in ``.work/<name>/`` of a folder that holds several (one repo, a config each)."""
    from conceptforge.engine.store import is_store, join

    location = store.location
    try:
        if location.local:
            import os

            names = sorted(entry.name for entry in os.scandir(location.path("")) if entry.is_dir())
        else:
            location.refresh()
            names = sorted(
                e["name"].rstrip("/").rsplit("/", 1)[-1]
                for e in location.fs.ls(location.path(""), detail=True)
                if e.get("type") == "directory"
            )
    except FileNotFoundError:
        return []
    return [name for name in names if is_store(join(location.url, name))]


def status_lines(
    out: str, num_shards: int | None = None, *, work: str | None = None, label: str | None = None
) -> list[str]:
    """What ``conceptforge status`` prints. Reads only: works on a read-only folder or bucket.

    ``label`` names a run inside a repo of runs in the lines (``OUT [config]``); hints always
    name ``out`` itself, so they run as printed.
    """
    from conceptforge.engine.assembly import damage_message, read_done, verify_assembled
    from conceptforge.engine.store import ItemStore, Location, is_store, join
    from conceptforge.errors import DataNotFoundError, InvalidArgumentError
    from conceptforge.output import WORK_DIR, not_a_run

    label = label or out
    work = work or join(out, WORK_DIR)
    if not is_store(work):
        raise DataNotFoundError(not_a_run(out))
    store = ItemStore(work, create=False)
    config = store.stored_config()
    if config is None:
        subs = _sub_runs(store)
        if subs:  # e.g. a binding repo: one run per config, then the shared card
            lines = []
            for name in subs:
                lines += status_lines(out, num_shards, work=join(work, name), label=f"{out} [{name}]")
            card = read_done(store.location)
            lines.append(f"{out}: card {'written' if card else 'not written yet'}")
            if card and (problems := verify_assembled(Location(out), card)):
                lines.append(f"damaged: {damage_message(out, problems)}")
            return lines
        reports = store.shard_reports()
        gone = _gone_shards(reports)
        lines = [f"{label}: started, nothing finished yet (settings are fixed with the first chunk)"]
        for (shards, index), report in sorted(reports.items()):
            state = gone.get((shards, index), report.get("state", NO_REPORT))
            lines.append(f"  shard {index} of {shards}: last state: {state}")
        stopped = [index for (shards, index) in sorted(reports) if reports[(shards, index)].get("state") != "finished"]
        shards = max((key[0] for key in reports), default=1)
        return lines + rerun_lines(shards, stopped, reports, gone)
    plan = config["plan"]
    sizes = plan.get("chunk_items") or [plan["chunk_size"]] * plan["chunks"]
    done = store.chunk_states()
    damaged = store.damaged_chunks()
    reports = store.shard_reports()
    if num_shards is not None and num_shards < 1:
        raise InvalidArgumentError(f"--num-shards must be >= 1, got {num_shards}")
    if num_shards is None:
        num_shards = max((key[0] for key in reports), default=1) if reports else 1
    done_items = sum(sizes[i] for i in done if i < len(sizes))
    lines = [
        f"{label}: stage {config.get('stage')}, {done_items} of {plan['items']} items done "
        f"({len(done)} of {plan['chunks']} chunks){', ' + str(len(damaged)) + ' damaged (redone on rerun)' if damaged else ''}"
    ]
    gone = _gone_shards(reports)
    missing_shards = []
    for index in range(num_shards):
        mine = [c for c in range(plan["chunks"]) if c % num_shards == index]
        left = [c for c in mine if c not in done]
        # No report: it never started, or was killed (SIGKILL) before its first item; a stop signal
        # there is recorded ("interrupted by SIGTERM before its first item").
        state = reports.get((num_shards, index), {}).get("state", NO_REPORT)
        if left:
            missing_shards.append(index)
            if state == "running" and (num_shards, index) in gone:
                state = gone[(num_shards, index)]
        items_left = sum(sizes[c] for c in left)
        lines.append(
            f"  shard {index} of {num_shards}: {len(mine) - len(left)}/{len(mine)} chunks done, "
            f"{items_left} items left, last state: {state if left or state != 'running' else 'finished'}"
        )
    failures = failed_lines(store, out, total=plan["items"], complete=len(done) == plan["chunks"])
    lines += failures
    sweep = _sweep_args(store, config)
    if sweep is not None:  # a sweep (evaluate --models): which (model, task) pairs are missing
        from conceptforge.loaders.sweep import gpu_item_indices
        from conceptforge.loaders.sweep import status_lines as sweep_lines

        lines += sweep_lines(config, sweep, sorted(done))
        gpu_shards = {index % num_shards for index in gpu_item_indices(sweep)}
    else:
        gpu_shards = set()
    lines += claim_lines(store, [c for c in range(plan["chunks"]) if c not in done])
    lines += resubmission_lines(out, num_shards, missing_shards, reports, gpu_shards=gpu_shards)
    lines += rerun_lines(num_shards, missing_shards, reports, gone)
    lines += lock_lines(store.location, out)
    finished = read_done(store.location)
    if finished:
        problems = verify_assembled(Location(out), finished)
        if problems:
            lines.append(f"assembled: damaged — {damage_message(out, problems)}")
        else:
            checked = " (sizes and sha256 checked)" if finished.get("manifest") else ""
            lines.append(f"assembled: yes ({len(finished.get('files', []))} files{checked})")
    elif len(done) == plan["chunks"] and failures:
        lines.append("assembled: no — see the failed items above")
    elif len(done) == plan["chunks"]:
        lines.append(f"assembled: no — every chunk is done: run `conceptforge assemble {out}`")
    else:
        lines.append("assembled: no — the last shard to finish assembles (or `conceptforge assemble` afterwards)")
    return lines


NO_REPORT = "no report (not started, or killed before its first item)"


def claim_lines(store, missing: list[int]) -> list[str]:
    """Missing chunks another process is making now (their claims, see conceptforge.engine.claims):
    a second sweep into one --out left them to the first, and a rerun now would skip them too."""
    from conceptforge.engine.claims import claims_held_elsewhere

    held = claims_held_elsewhere(store, missing)
    by: dict[str, list[int]] = {}
    for index, record in sorted(held.items()):
        by.setdefault(f"process {record.get('pid', '?')} on {record.get('host', '?')}", []).append(index)
    return [f"being made now: chunk(s) {', '.join(map(str, chunks))} by {who}" for who, chunks in by.items()]


def rerun_lines(num_shards: int, missing: list[int], reports: dict, gone: dict) -> list[str]:
    """For shards not run by a Slurm array (one process, or ``--shard-index`` by hand) that stopped
    with work left: the command line each ran (recorded in its report), to run again as printed.

    Why: after a kill -9 ``status`` listed the missing items but not how to make them (issue
    45.8); a Slurm array gets its ``sbatch --array=`` line from :func:`resubmission_lines`."""
    import os
    import shlex

    lines = []
    for index in missing:
        report = reports.get((num_shards, index)) or {}
        if report.get("slurm") or not report.get("command"):
            continue
        if report.get("state") == "running" and (num_shards, index) not in gone:
            continue  # still at it
        command = shlex.join(report["command"])
        cwd = report.get("cwd")
        if cwd and cwd != os.getcwd():
            command = f"cd {shlex.quote(cwd)} && {command}"
        what = f"shard {index} of {num_shards}" if num_shards > 1 else "what is missing"
        lines.append(f"rerun {what}: {command}")
    return lines


def _sweep_args(store, config) -> dict | None:
    """The assembly arguments of a sweep (its items: labels, what each needs), else None."""
    import json

    from conceptforge.engine.assembly import ASSEMBLY_ARGS

    if config.get("stage") != "evaluate-sweep":
        return None
    try:
        return json.loads(store.location.read(ASSEMBLY_ARGS))["args"]
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def lock_lines(location, out: str) -> list[str]:
    """Who holds the assembly lock, and whether that process still runs (a kill -9 leaves it)."""
    import time

    from conceptforge.engine.assembly import LOCK_NAME, lock_holder
    from conceptforge.engine.processes import holder_alive

    holder = lock_holder(location)
    if holder is None:
        return []
    who = f"process {holder.get('pid', '?')} on {holder.get('host', '?')}"
    alive = holder_alive(holder)
    if alive is False:
        return [f"assembly lock: left by {who}, which is gone; `conceptforge assemble {out}` takes it over"]
    if alive:
        return [f"assembling now: {who}"]
    modified = location.mtime(LOCK_NAME)
    age = f", refreshed {time.time() - modified:.0f} s ago" if modified is not None else ""
    return [f"assembly lock: held by {who} (another host{age}; a lock not refreshed for 300 s is taken over)"]


def failed_lines(store, out: str, *, limit: int = 20, total: int | None = None, complete: bool = True) -> list[str]:
    """The items that failed every attempt, one line each (see conceptforge.engine.failures).

    When every item of the run (``total``) failed there is nothing to assemble without them: the
    advice is to fix the cause (the stage, a setting), not ``assemble --allow-failed``.
    """
    from conceptforge.engine.failures import failed_items

    failures = failed_items(store)
    if not failures:
        return []
    if total is not None and len(failures) >= total:
        head = (
            f"failed: every one of the {len(failures)} item(s) failed every attempt: the stage or its settings are "
            "at fault (the errors below); fix that and rerun the same command"
        )
    elif not complete:  # assembling without them is no option while other chunks are missing
        head = (
            f"failed: {len(failures)} item(s) failed every attempt so far: rerun the same command to retry them "
            "and make the rest"
        )
    else:
        head = (
            f"failed: {len(failures)} item(s) failed every attempt: rerun the same command to retry them, or "
            f"`conceptforge assemble {out} --allow-failed` to assemble without them"
        )
    lines = [head]
    lines += [f"  {f.item_id} ({f.split}, {f.attempts} attempts): {f.error}" for f in failures[:limit]]
    if len(failures) > limit:
        lines.append(f"  ... {len(failures) - limit} more")
    return lines


# -- dead shards and what to resubmit (Slurm arrays) ----------------------------------------------
def _gone_shards(reports: dict) -> dict[tuple[int, int], str]:
    """Shards whose report says "running" but whose process is gone (SIGKILL, OOM, a lost node):
    their Slurm job is no longer known to ``squeue``, or else their pid on this host is not alive."""
    import os
    import shutil
    import socket
    import subprocess

    running = {key: report for key, report in reports.items() if report.get("state") == "running"}
    gone: dict[tuple[int, int], str] = {}
    decided: set[tuple[int, int]] = set()
    jobs = {str(r["slurm"]["job"]): key for key, r in running.items() if (r.get("slurm") or {}).get("job")}
    if jobs and shutil.which("squeue"):
        try:
            result = subprocess.run(
                ["squeue", "-h", "-o", "%i", "-j", ",".join(jobs)], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.SubprocessError):
            result = None
        if result is not None and (result.returncode == 0 or "Invalid job id" in result.stderr):
            alive = {line.strip() for line in result.stdout.splitlines() if line.strip()}
            for job, key in jobs.items():
                decided.add(key)
                if job not in alive:
                    gone[key] = f"stopped (Slurm job {job} is no longer queued or running)"
    host = {os.uname().nodename, socket.gethostname()}
    for key, report in running.items():
        if key in decided or report.get("host") not in host or not isinstance(report.get("pid"), int):
            continue
        try:
            os.kill(report["pid"], 0)
        except ProcessLookupError:
            gone[key] = f"stopped (process {report['pid']} on {report.get('host')} is gone)"
        except PermissionError:  # alive, another user's
            pass
    return gone


def resubmission_lines(
    out: str, num_shards: int, missing: list[int], reports: dict, *, gpu_shards: set[int] = frozenset()
) -> list[str]:
    """The shards still missing as an ``sbatch --array=`` list and a command to run (Slurm), or
    as ``--shard-index`` values. Shards run by an array x srun/MPI composition map back to their
    array task (shard // world). Array tasks holding a shard of ``gpu_shards`` (a sweep's items
    whose model needs a GPU) get their own command with ``--gres=gpu:1``."""
    from conceptforge.engine.launchers import array_spec

    if not missing or num_shards < 2:
        return []
    slurm = [r["slurm"] for r in reports.values() if r.get("num_shards") == num_shards and r.get("slurm")]
    if not slurm:
        return [
            f"missing shards: {array_spec(missing)} of {num_shards}: rerun your command with --num-shards {num_shards} "
            f"--shard-index I for each (or as a Slurm array: sbatch --array={array_spec(missing)} with --num-shards {num_shards})"
        ]
    world = int(slurm[0].get("world") or 1)
    tasks = sorted({index // world for index in missing})
    scripts = sorted({str(r["script"]) for r in slurm if r.get("script")})
    script = scripts[0] if len(scripts) == 1 else "YOUR_JOB_SCRIPT"
    lines = [
        f"missing array tasks: --array={array_spec(tasks)} (of {num_shards // world} shards"
        + (f", {world} processes each" if world > 1 else "")
        + ")",
    ]
    # A task Slurm still has (requeued after a preemption, held, pending) runs again by itself:
    # resubmitting it too would run it twice.
    queued = _queued_array_tasks({str(r["job"]).split("_", 1)[0] for r in slurm if r.get("job")})
    waiting = {task: queued[task] for task in tasks if task in queued}
    if waiting:
        held = [
            task
            for task, (state, reason, _) in sorted(waiting.items())
            if "held" in f"{state} {reason}".lower() or "hold" in state.lower()
        ]
        lines.append(
            f"still queued in Slurm: --array={array_spec(sorted(waiting))} ("
            + ", ".join(f"{task}: {state.lower()}" for task, (state, _, _) in sorted(waiting.items()))
            + "); Slurm runs them, do not resubmit"
            + (
                f"; held ones start after `scontrol release {','.join(waiting[task][2] for task in held)}`"
                if held
                else ""
            )
        )
    rest = [task for task in tasks if task not in waiting]
    gpu = [task for task in rest if any(task * world + rank in gpu_shards for rank in range(world))]
    cpu = [task for task in rest if task not in gpu]
    if gpu:
        lines.append(f"resubmit them: sbatch --array={array_spec(gpu)} --gres=gpu:1 {script}")
    if cpu:
        lines.append(f"resubmit them: sbatch --array={array_spec(cpu)} {script}")
    return lines


#: squeue states of a job that Slurm will still run (or is running).
_QUEUED_STATES = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                  "RESIZING", "SUSPENDED", "STAGE_OUT", "SIGNALING"}  # fmt: skip


def _queued_array_tasks(array_jobs: set[str]) -> dict[int, tuple[str, str, str]]:
    """Array task id -> (state, reason, job id) for the tasks of ``array_jobs`` still in Slurm's
    queue; {} when Slurm cannot be asked (no squeue, another machine)."""
    import shutil
    import subprocess

    if not array_jobs or not shutil.which("squeue"):
        return {}
    try:
        result = subprocess.run(
            ["squeue", "-h", "-r", "-o", "%i|%T|%r", "-j", ",".join(sorted(array_jobs))],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    queued: dict[int, tuple[str, str, str]] = {}
    for line in result.stdout.splitlines():
        job, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        array_job, sep, task = job.partition("_")
        if sep and task.isdigit() and array_job in array_jobs and state.upper() in _QUEUED_STATES:
            queued[int(task)] = (state.upper(), reason, job)
    return queued


def run(args: argparse.Namespace) -> int:
    for line in status_lines(args.out, args.num_shards):
        print(line)
    return 0
