"""
run_all.sh's measurement policy and its reading of records, so that the shell script only runs things:
which runs a variant gets (a third only when the first two disagree), how many steps its loader alone
and its profiled run take after run 1, and each fact it needs from Python, as one subcommand each
(`python train.py --facts VARIANTS` gives the facts before a run: the script holds the presets):

    python -m starvation.plan missing                   # the packages the scripts need and this Python lacks
    python -m starvation.plan argv ENV_JSON             # a run folder's recorded options, one a line
    python -m starvation.plan gpu ENV_JSON              # the GPU a run folder's run was on
    python -m starvation.plan write-env ENV_JSON ...    # the run folder's env.json, written whole
    python -m starvation.plan whole RECORD              # exit 0 if the record reads back whole
    python -m starvation.plan agree RECORD_1 RECORD_2   # exit 0, saying "within N%", if a third run adds little
    python -m starvation.plan after RECORD NSYS_STEPS   # the loader alone's and the profiled run's steps
    python -m starvation.plan figure RECORD             # the figure a run's progress line shows
    python -m starvation.plan nvtx-fallback RECORD      # exit 0 if the profiled run fell back to torch.cuda.nvtx

argv and gpu exit 3 for an env.json that is not JSON, 4 for one without the key; the tests exit 0 or 1.
"""
import datetime
import importlib.util
import json
import os
import platform
import sys

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
        return f"{r['steps_per_s']:.2f} batches/s, on the output path {100 * r['data_wait_share']:.0f}% of the window"
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
    with open(path + ".tmp", "w") as f:
        json.dump(env, f, indent=2)
    os.replace(path + ".tmp", path)  # whole or not at all: --resume reads it


def main(argv: list[str]) -> int:
    command, args = argv[0], argv[1:]
    if command == "missing":  # found without importing them: torch takes seconds
        lacks = [m for m in ("torch", "torchvision", "nvtx", "matplotlib") if importlib.util.find_spec(m) is None]
        print(", ".join(lacks))
        return 3 if lacks else 0
    if command == "write-env":
        write_env(args[0], args[1], args[2], args[3], args[4], args[5:])
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
