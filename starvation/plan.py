"""
run_all.sh's measurement policy and its reading of records, so that the shell script only runs things:
which runs a variant gets (a third only when the first two disagree), how many steps its loader alone
and its profiled run take after run 1, and each fact it needs from Python, as one subcommand each
(`python train.py --facts VARIANTS` gives the facts before a run: the script holds the presets):

    python -m starvation.plan missing                   # the packages the scripts need and this Python lacks
    python -m starvation.plan argv ENV_JSON             # a run folder's recorded options, one a line
    python -m starvation.plan gpu ENV_JSON              # the GPU a run folder's run was on
    python -m starvation.plan write-env ENV_JSON ...    # the run folder's env.json, written whole
    python -m starvation.plan resumable DIR STUDY GPUS VARIANTS...  # exit 0, or 1 saying why the folder
                                                        # and the options it recorded disagree
    python -m starvation.plan whole RECORD              # exit 0 if the record reads back whole
    python -m starvation.plan agree RECORD_1 RECORD_2   # exit 0, saying "within N%", if a third run adds little
    python -m starvation.plan after RECORD NSYS_STEPS   # the loader alone's and the profiled run's steps
    python -m starvation.plan figure RECORD             # the figure a run's progress line shows
    python -m starvation.plan nvtx-fallback RECORD      # exit 0 if the profiled run fell back to torch.cuda.nvtx

argv and gpu exit 3 for an env.json that is not JSON, 4 for one without the key; write-env exits 3, saying
what it could not write, when it cannot; the tests exit 0 or 1.
"""
import datetime
import importlib.util
import json
import os
import platform
import sys
from pathlib import Path

from starvation import records
from starvation.verdict import AGREE_TOLERANCE

PROFILED_STEPS = 40  # at most, in the profiled run after a window closed by time: enough past the warm-up


def read(path: str):
    with open(path) as f:
        return json.load(f)


def alone_steps(window_steps: int) -> int:
    """The loader alone's steps after a window of `window_steps`: half as many. A rate needs no more, and
    every variant's run 1 pays for it (train.py --then-alone takes the same)."""
    return (window_steps + 1) // 2


def after(record: dict, nsys_steps: int) -> tuple[int, int, int]:
    """After run 1, whose window (closed by time) held some steps: the loader alone's steps, the profiled
    run's (whose window is fixed: as many, up to PROFILED_STEPS) and the steps nsys records of them."""
    held = record["steps"]
    return alone_steps(held), min(held, PROFILED_STEPS), min(held, nsys_steps)


def agree(a: dict, b: dict) -> bool:
    """Two runs' figures within AGREE_TOLERANCE of the faster: a third run would only repeat their spread."""
    x, y = a["steps_per_s"], b["steps_per_s"]
    return abs(x - y) <= AGREE_TOLERANCE * max(x, y)


def figure(r: dict) -> str:
    if r.get("loader_only"):
        return f"{r['loader_batches_per_s']:.2f} batches/s"
    if r.get("output_only"):
        return f"{r['output_batches_per_s']:.2f} batches/s processed, no model"
    if r.get("study") == "infer":
        return f"{r['batches_per_s']:.2f} batches/s, on the output path {100 * r['output_path_share']:.0f}% of the window"
    return f"{r['steps_per_s']:.2f} steps/s, waiting for data {100 * r['data_wait_share']:.0f}% of the window"


def facts(script: str, presets: dict, groups: dict, variants: str) -> int:
    """Every fact a run needs before it starts, from one Python start-up (importing torch takes seconds),
    printed by the study's script (`SCRIPT --facts VARIANTS`, which hands over its presets and groups): the
    GPUs torch sees, the first one's name, what env.json records of this Python and machine, then the
    variants (a group expands, every other name is a preset or its ceiling), a line each."""
    import torch
    import torchvision

    from starvation.runtime import usable_cpus  # as the records count the CPUs: taskset included
    names = [v for part in variants.split(",") for v in groups.get(part, part).split(",")]
    twice = next((v for i, v in enumerate(names) if v in names[:i]), None)
    bad = [v for v in names if v != "ceiling" and v.removeprefix("ceiling-") not in presets]
    if bad:
        print(f"error: unknown variant(s): {' '.join(bad)} (see python {script} --list-variants)")
        return 2
    if twice:
        print(f"error: --variants {variants}: '{twice}' is named twice")
        return 2
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    env = dict(cpu_count=usable_cpus(), torch=torch.__version__, torchvision=torchvision.__version__,
               python=platform.python_version(), host=platform.node())
    print(gpus, torch.cuda.get_device_name() if gpus else "cpu", json.dumps(env), *names, sep="\n")
    return 0


def write_env(path: str, facts_json: str, nsys: str, gpu: str, gpus: str, rest: list[str]) -> None:
    """env.json: the machine (facts' line), this run's study, variants and options, written whole."""
    cut = rest.index("--")
    env = dict(gpu=gpu, gpus=int(gpus), study=os.environ["STUDY"], variants=rest[:cut], **json.loads(facts_json),
               nsys=nsys or None, argv=rest[cut + 1:],
               date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
    records.write_json(path, env)  # whole or not at all: --resume reads it


def resumable(run_dir: Path, study: str, gpus: int, variants: list[str]) -> str | None:
    """Why a run folder cannot be resumed with the options its env.json recorded (their study, GPUs and
    variants, as this run_all.sh reads them), or None: the options, env.json and the records must agree, or
    the records of one run would be finished as another's."""
    try:
        env = records.read_json(run_dir / "env.json")
        recorded = dict(study=env.get("study", "train"), gpus=env.get("gpus", 1), variants=env.get("variants"))
        for key, ours in (("study", study), ("gpus", gpus), ("variants", variants)):
            if recorded[key] != ours:  # (a folder of an older run_all.sh holds no study nor GPU count: 1 GPU, part 1)
                return f"its env.json says {key} {recorded[key]!r}, its recorded options give {ours!r}"
        run = records.load_run(run_dir)  # each record checked, the study of its runs included
    except records.Malformed as e:
        return str(e)
    files = [p for p in run_dir.glob("*.json") if p.name not in ("env.json", "diagnosis.json")]
    strays = sorted({p.name.split(".")[0] for p in files} - set(variants))
    if strays:
        return f"it holds records of {', '.join(strays)}, which its env.json does not list"
    for v in run.variants:
        for r in [*v.runs, v.loader, v.profiled]:
            if r is not None and (r.get("study", "train"), r.get("world_size", 1)) != (study, gpus):
                return (f"{v.name}'s records include one of {r.get('study', 'train')}.py on {r.get('world_size', 1)} "
                        f"GPU(s), and the folder is {study}.py's on {gpus}")
    return None


def main(argv: list[str]) -> int:
    command, args = argv[0], argv[1:]
    if command == "missing":  # found without importing them: torch takes seconds
        lacks = [m for m in ("torch", "torchvision", "nvtx", "matplotlib") if importlib.util.find_spec(m) is None]
        print(", ".join(lacks))
        return 3 if lacks else 0
    if command == "resumable":
        why = resumable(Path(args[0]), args[1], int(args[2]), args[3:])
        if why:
            print(why)
        return 1 if why else 0
    if command == "write-env":
        try:
            write_env(args[0], args[1], args[2], args[3], args[4], args[5:])
        except OSError as e:
            print(f"cannot write {e.filename} ({e.strerror})")
            return 3
        return 0
    try:
        record = read(args[0])
    except (OSError, ValueError):
        return 3 if command in ("argv", "gpu") else 1  # run_all.sh names the folder that cannot be resumed
    if command == "whole":
        return 0
    if command in ("argv", "gpu"):
        if not isinstance(record, dict) or command not in record:
            return 4
        if command == "argv":
            print(*record["argv"], sep="\n")
        else:
            print(record["gpu"])
        return 0
    if command == "agree":
        try:
            if not agree(record, read(args[1])):
                return 1
        except (OSError, ValueError, KeyError):
            return 1
        print(f"within {AGREE_TOLERANCE:.0%}")
        return 0
    if command == "after":
        print(*after(record, int(args[1])))
        return 0
    if command == "figure":
        print(figure(record))
        return 0
    if command == "nvtx-fallback":
        return 0 if record.get("nvtx_backend") == "torch" else 1
    print(f"starvation.plan: unknown command {command!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
