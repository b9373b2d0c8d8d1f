"""
Settings and the command line: each setting is a dataclass field and its flag in one place (setting());
each study's Config (starvation/settings.py) extends Measurement, its presets fill it, and the checks
every script's flags need run before anything else does.
"""
import argparse
import json
import os
import platform
import sys
from dataclasses import dataclass, field, fields, replace

import torch

from starvation.runtime import DIST, usable_cpus

# -----------------------------------------------------------------------------
# settings: a dataclass field and its flag in one place

COMPUTE, MEASUREMENT = "compute", "measurement"


def positive_int(s: str) -> int:
    n = int(s)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {s}")
    return n


def seed_int(s: str) -> int:
    """A seed torch's generators take: 0 to 2**63 - 1 (a larger one overflowed in manual_seed)."""
    n = int(s)
    if not 0 <= n < 2**63:
        raise argparse.ArgumentTypeError(f"must be 0 to 2**63 - 1, got {s}")
    return n


def nice_int(s: str) -> int:
    """An increment of a process's nice value: 0 to 19, the range Linux's nice values span above 0."""
    n = int(s)
    if not 0 <= n <= 19:
        raise argparse.ArgumentTypeError(f"must be 0 to 19 (Linux's nice values go up to 19), got {s}")
    return n


def nonneg_int(s: str) -> int:
    n = int(s)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {s}")
    return n


def count_or_auto(s: str) -> int | str:
    """A count of 0 or more, or "auto": measured at the run's start."""
    return "auto" if s == "auto" else nonneg_int(s)


def setting(default, group: str, help: str, *, preset: bool = False, loader: bool = False, column: bool = False,
            cpu=None, tracked: bool = False, **flag):
    """A field of a Config and its command-line flag, in one place. `preset`: a preset sets it, unless the
    flag is given; `loader`: it shapes only the input pipeline (so --data-on-gpu refuses it); `column`:
    a column of --list-variants; `cpu`: its value on a machine without a GPU, unless the flag is given
    (fit_to_machine); `tracked`: parse_preset_args' `settings_given` holds it only when given; `flag`: argparse's
    keywords, where the type does not say them."""
    return field(default=default, metadata=dict(group=group, help=help, preset=preset, loader=loader,
                                                column=column, cpu=cpu, tracked=tracked, flag=flag))


def fit_to_machine(cfg, settings_given: dict):
    """Without a GPU, cfg with the sizes of run_all.sh's small CPU run for every size flag not given, and the
    line that says so, for the script to print once its flags are accepted (a refusal stays one line): at full
    size, 19 steps of train.py took 12.5 minutes and about 7 GB on a 2-core CPU machine. Returns (cfg, line)."""
    if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available()):
        return cfg, None
    small = {f.name: f.metadata["cpu"] for f in fields(cfg)
             if f.metadata.get("cpu") is not None and f.name not in settings_given}
    if not small:
        return cfg, None
    return replace(cfg, **small), None if DIST.rank != 0 else (
        "no GPU: a small CPU run (" + ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in small.items())
        + "), as run_all.sh makes it; give those flags for other sizes")


@dataclass(frozen=True)
class Measurement:
    """The settings every script's run has, whatever its study: each study's Config extends it."""
    device: str = setting("auto", COMPUTE, "auto picks cuda when present (default: auto)",
                          choices=("auto", "cuda", "cpu"))
    profile: str = setting("none", MEASUREMENT, "nsys: cudaProfilerApi start/stop around the measured steps (see "
                           "--profile-steps), for `nsys profile --capture-range=cudaProfilerApi`; torch: run under "
                           "torch.profiler (default: none)", choices=("none", "nsys", "torch"))
    profile_steps: int | None = setting(None, MEASUREMENT, "with --profile: record only the last N measured steps, "
                                        "once the pipeline has settled; the run's throughput still covers every "
                                        "step (default: all measured steps)", type=positive_int, metavar="N")
    profile_dir: str = setting("traces", MEASUREMENT, "where --profile torch writes its trace (default: traces)")
    profile_stack: bool = setting(False, MEASUREMENT, "with --profile torch: record Python's frames too (with_stack), "
                                  "which name the calls that hold a thread; recording them slows every call, so "
                                  "the traced steps run slower than the run's (default: off)")
    nvtx: bool = setting(True, MEASUREMENT, "no NVTX ranges (default: the study's ranges and colours)",
                         name="--no-nvtx", action="store_false")
    json: str | None = setting(None, MEASUREMENT, "write the run's record as JSON to PATH (under torchrun, rank 0 "
                               "writes the job's)", metavar="PATH")
    seed: int = setting(0, COMPUTE, "seed for the model and the data (default: 0)", type=seed_int)
    # note: a window of a fixed number of steps costs 40 s at the study's baseline and 2 s at a fast ceiling
    window_s: float = setting(10.0, COMPUTE, "the window closes after S seconds once it holds --min-steps, and at "
                              "--steps at the latest; --steps alone asks for a window of that many (default: 10)",
                              type=float, metavar="S", tracked=True)
    min_steps: int = setting(20, COMPUTE, "the fewest measured steps (default: 20, at most --steps)",
                             type=positive_int, metavar="N", tracked=True)


def preset_table(cls, presets: dict, defaults: dict) -> list[str]:
    """--list-variants: a row per preset, a column per setting of `cls` marked as one."""
    cols = tuple(f.name for f in fields(cls) if f.metadata.get("column"))
    rows = [("variant",) + cols + ("what it changes",)]
    for name, (preset, what) in presets.items():
        s = dict(defaults, **preset)
        rows.append((name,) + tuple("yes" if s[c] is True else "-" if s[c] is False else str(s[c]) for c in cols)
                    + (what,))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def add_setting_flags(p: argparse.ArgumentParser, cls) -> argparse.ArgumentParser:
    """A flag for each field of the dataclass `cls` made with setting(), in its order and group."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    # the script's own groups first, then compute, then measurement (Measurement's fields come first in cls)
    order = {COMPUTE: 1, MEASUREMENT: 2}
    for f in sorted(fields(cls), key=lambda f: order.get(f.metadata.get("group"), 0)):
        m = f.metadata
        if "group" not in m:
            continue
        if m["group"] not in groups:
            groups[m["group"]] = p.add_argument_group(m["group"])
        flag = dict(m["flag"])
        name = flag.pop("name", "--" + f.name.replace("_", "-"))
        if f.type in (bool, "bool") and "action" not in flag:
            # a preset's switch can be turned either way; the others are only ever turned on
            flag["action"] = argparse.BooleanOptionalAction if m["preset"] else "store_true"
        # None: not given, so that the preset's value, or a default derived from other flags, stands
        flag.setdefault("default", None if m["preset"] or m["loader"] or m["tracked"] or m["cpu"] is not None
                        else f.default)
        groups[m["group"]].add_argument(name, dest=f.name, help=m["help"], **flag)
    return p


def refuse(prog: str, message: str):
    """A script's refusal of what it was asked, before anything runs: the error and one line of hint, exit 2."""
    sys.stderr.write(f"{prog}: error: {message}\n(python {prog} --help lists every flag)\n")
    sys.exit(2)


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal is the error and one line of hint, not the usage (--help has it)."""

    def error(self, message: str):
        refuse(self.prog, message)


def preset_parser(prog: str, doc: str, cls, presets: dict, variant_help: str, default: str | None,
                  groups: dict) -> argparse.ArgumentParser:
    """A script's parser: --variant picks a preset, --list-variants lists them, and a flag per setting;
    run_all.sh's --facts VARIANTS (its groups expanded: facts, below)."""
    p = Parser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.presets, p.groups = presets, groups
    p.not_settings = {"list_variants", "facts"}  # flags that are no setting of the run: a script adds its own
    p.add_argument("--variant", choices=presets, default=default, help=variant_help)
    p.add_argument("--list-variants", action="store_true", help="print the presets and exit")
    p.add_argument("--facts", metavar="VARIANTS", help=argparse.SUPPRESS)
    return add_setting_flags(p, cls)


def parse_preset_args(p: argparse.ArgumentParser, defaults: dict, listing, argv: list[str] | None):
    """The parsed flags, the pipeline settings given explicitly (they override the preset's), and the
    other settings given; --list-variants prints `listing()` and exits."""
    args = p.parse_args(argv)
    if args.list_variants:
        print(listing())
        sys.exit(0)
    if args.facts is not None:
        sys.exit(facts(p.prog, p.presets, p.groups, args.facts))
    pipeline_given = {k: v for k, v in vars(args).items() if k in defaults and v is not None}
    settings_given = {k: v for k, v in vars(args).items()
                      if k not in defaults and k not in p.not_settings and v is not None}
    return args, pipeline_given, settings_given


def resolve_window(cfg, settings_given: dict):
    """cfg with the window's bounds as asked: --steps N alone asks for exactly N steps (a 600-step check is
    600 steps, not what --window-s holds), and the fewest steps are never more than the most."""
    only_steps = "steps" in settings_given and not {"window_s", "min_steps"} & settings_given.keys()
    return replace(cfg, min_steps=cfg.steps if only_steps else min(cfg.min_steps, cfg.steps))


def check_measurement(p: argparse.ArgumentParser, cfg, settings_given: dict) -> None:
    """The checks every script's measurement flags need, before anything runs; `settings_given`, from
    parse_preset_args."""
    has_cuda = torch.cuda.is_available()
    if cfg.device == "cuda" and not has_cuda:
        p.error("--device cuda: no CUDA device is visible to torch; use --device cpu or auto")
    if cfg.profile == "nsys" and (cfg.device == "cpu" or not has_cuda):
        p.error("--profile nsys needs CUDA (it brackets the steps with cudaProfilerApi); on the CPU, profile the "
                f"whole run instead: nsys profile --trace=nvtx,osrt python {os.path.basename(sys.argv[0])} ...")
    if not cfg.window_s > 0:
        p.error(f"--window-s {cfg.window_s}: the window needs a positive number of seconds")
    if cfg.profile_steps is not None and (cfg.profile == "none" or cfg.profile_steps > cfg.steps):
        p.error(f"--profile-steps {cfg.profile_steps} needs --profile nsys|torch and at most --steps ({cfg.steps}) "
                "steps")
    if cfg.profile_stack and cfg.profile != "torch":
        p.error("--profile-stack records Python's frames in torch.profiler's trace: add --profile torch")
    for flag, path, needed in (("--json", cfg.json, cfg.json is not None),
                               ("--profile-dir", cfg.profile_dir, cfg.profile == "torch")):
        if needed and (why := unwritable(path, is_dir=flag == "--profile-dir")):
            p.error(f"{flag} {path!r}: {why}, so the run's output could not be written: check it before the run")


def unwritable(path: str, is_dir: bool) -> str | None:
    """Why `path` cannot be written (for a folder: made), or None."""
    if not path:
        return "an empty path"
    p = os.path.abspath(path)
    if os.path.isdir(p) != is_dir and os.path.exists(p):
        return "a folder" if not is_dir else "a file, not a folder"
    parent = p if is_dir else os.path.dirname(p)
    while not os.path.exists(parent):  # a folder to be made: its nearest existing ancestor must take it
        if not is_dir or parent == os.path.dirname(parent):
            return f"no folder {os.path.dirname(p)}"
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        return f"{parent} is not a writable folder"
    return None


def check_launcher(p: argparse.ArgumentParser, one_process: bool = False) -> None:
    """A distributed environment this script can run in, or one line and exit 2: torchrun sets RANK,
    WORLD_SIZE and MASTER_ADDR (ranks started by hand, one per node, set them too); without MASTER_ADDR
    torch raises a ValueError that names no fix."""
    if DIST.problem:
        p.error(DIST.problem)
    if not DIST.launched or DIST.world_size == 1:
        return
    script = os.path.basename(sys.argv[0])
    if one_process:
        p.error(f"{script} runs as one process, and this environment asks for {DIST.world_size} "
                "(WORLD_SIZE): run it without torchrun, or unset RANK and WORLD_SIZE")
    if "MASTER_ADDR" not in os.environ:
        p.error(f"RANK and WORLD_SIZE={DIST.world_size} are set, but not MASTER_ADDR, so the ranks cannot meet: "
                f"start the job with torchrun --standalone --nproc-per-node {DIST.world_size} {script} ..., or "
                "unset RANK and WORLD_SIZE")

def check_workers(p: argparse.ArgumentParser, workers: int) -> None:
    """A worker count the machine can hold: each is a process, with its batches in memory."""
    cpus = usable_cpus()
    if workers > 4 * cpus:
        p.error(f"--workers {workers}: more than 4 per CPU ({cpus} CPUs here), which only queues processes for "
                f"the same cores and memory; at most --workers {4 * cpus}")


def facts(script: str, presets: dict, groups: dict, variants: str) -> int:
    """Every fact a run needs before it starts, from one Python start-up (importing torch takes seconds),
    printed by the study's script (`SCRIPT --facts VARIANTS`, which hands over its presets and groups): the
    GPUs torch sees, the first one's name, what env.json records of this Python and machine, then the
    variants (a group expands, every other name is a preset or its ceiling), a line each."""
    import torchvision

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
