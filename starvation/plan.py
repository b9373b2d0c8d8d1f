"""
run_all.sh's options and measurement policy, so that the shell script only runs things: its options read
and checked (a resumed folder's from its env.json), which runs each variant gets and with which flags (a
third run only when the first two disagree; the loader alone's and the profiled run's steps sized to run
1's window), the progress line each prints, and every fact the script needs from Python, one subcommand
each (`python train.py --facts VARIANTS` gives the facts before a run: the script holds the presets):

    python -m starvation.plan options ARGV...           # run_all.sh's options, checked: name=value lines
    python -m starvation.plan missing                   # the packages the scripts need and this Python lacks
    python -m starvation.plan make-folder DIR           # a new run folder, never one that exists
    python -m starvation.plan start-folder DIR NEW FACTS NSYS GPU GPUS STUDY VARIANTS... -- ARGV...
                                                        # its INCOMPLETE marker and (NEW: 1) env.json
    python -m starvation.plan reports GPU < HELP        # the nsys stats reports, by this nsys's names
    python -m starvation.plan resumable DIR STUDY GPUS GPU VARIANTS...  # exit 0, or 1 saying why the
                                                        # folder, its options and this machine disagree
    python -m starvation.plan schedule DIR GPU NSYS VARIANTS... -- ARGV...   # the runs, a request a line
                                          # (GPU: 1, or 0 for the small CPU run; NSYS: 0 where none was found)

`schedule` talks with run_all.sh, which runs it as a coprocess: it writes one request a line, tab-separated,
and reads the exit status of each run it asked for:

    say TEXT                        print TEXT (a variant's heading, a progress line, a skip)
    env NAME VALUE                  set NAME to VALUE in the environment of the runs that follow
    run VARIANT WHAT LOG FLAGS...   run the study's script with FLAGS (under torchrun with --gpus); answer its
                                    exit status; a failure is recorded as "VARIANT: WHAT exited N (log: LOG)"
    py VARIANT WHAT LOG FLAGS...    the same in one process, never under torchrun (the loader alone, part 2)
    nsys VARIANT nsys LOG FLAGS...  the same under nsys, then nsys stats and analyze.py --check on its reports

options, make-folder and start-folder exit 2, saying why in run_all.sh's words, when they refuse or cannot
write.
"""
import datetime
import errno
import importlib.util
import json
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from starvation import records
from starvation.thresholds import alone_steps
from starvation.verdict import AGREE_TOLERANCE

PROFILED_STEPS = 40  # at most, in the profiled run after a window closed by time: enough past the warm-up


class BadOption(Exception):
    """An option run_all.sh refuses: its message, in run_all.sh's words."""

# -----------------------------------------------------------------------------
# the options


@dataclass
class Options:
    """run_all.sh's options (./run_all.sh --help says what each does)."""
    study: str = "train"
    variants: str = "study"
    repeat: int = 3
    adaptive: bool = True  # --repeat not given: a third run only when the first two disagree
    steps: int | None = None
    nsys_steps: int = 10
    workers: int | None = None
    gpus: int | None = None
    out: str = ""
    nsys: bool = True
    loader: bool = True
    install: bool = True
    resume: str = ""
    help: bool = False
    extra: list[str] = field(default_factory=list)  # after --: flags for every variant

    def shell(self) -> str:
        """What run_all.sh reads: name=value lines."""
        return "\n".join(f"{k}={v}" for k, v in dict(
            study=self.study, variants=self.variants, gpus=self.gpus or "", out=self.out, use_nsys=int(self.nsys),
            install=int(self.install), resume=self.resume, help=int(self.help)).items())


def recorded_argv(folder: str) -> list[str]:
    """--resume DIR: the options DIR's run was started with, from its env.json."""
    env = Path(folder) / "env.json"
    if not env.is_file():
        raise BadOption(f"--resume {folder}: no env.json there; is it a folder run_all.sh wrote?")
    if not (Path(folder) / "INCOMPLETE").exists():
        raise BadOption(f"--resume {folder}: that run has finished (no INCOMPLETE marker)")
    try:
        argv = json.loads(env.read_text()).get("argv")
    except (OSError, ValueError, AttributeError):
        raise BadOption(f"--resume {folder}: env.json is not valid JSON (cut short?); the run cannot be resumed") \
            from None
    if not isinstance(argv, list) or argv[:1] == ["--resume"]:
        raise BadOption(f"--resume {folder}: env.json holds no argv (written by an older run_all.sh)")
    return argv


def parse_options(argv: list[str]) -> Options:
    """run_all.sh's command line, checked; --resume DIR reads the options DIR's run was started with."""
    o = Options()
    if argv[:1] == ["--resume"]:
        if len(argv) != 2:
            raise BadOption("--resume takes one folder and no other option: the run's own options are in its env.json")
        o = parse_options(recorded_argv(argv[1]))
        o.resume = o.out = argv[1]
        return o
    args = list(argv)

    def value(name: str) -> str:
        if not args or not args[0] or args[0].startswith("--"):
            raise BadOption(f"{name} needs a value (./run_all.sh --help lists the options)")
        return args.pop(0)

    def number(name: str, least: int) -> int:
        given = args.pop(0) if args else ""
        if not given.isdigit() or not given.isascii() or int(given) < least:
            raise BadOption(f"{name} needs a {'positive integer' if least else 'number'}, got '{given}'")
        return int(given)

    nsys_steps = None
    while args:
        name = args.pop(0)
        if name == "--variants":
            o.variants = value(name)
        elif name == "--study":
            o.study = args.pop(0) if args else ""
            if o.study not in ("train", "infer"):
                raise BadOption(f"--study needs train or infer, got '{o.study}'")
        elif name == "--repeat":
            o.repeat, o.adaptive = number(name, 1), False
        elif name == "--steps":
            o.steps = number(name, 1)
        elif name == "--nsys-steps":
            nsys_steps = number(name, 1)
        elif name == "--workers":
            o.workers = number(name, 0)
        elif name == "--gpus":
            o.gpus = number(name, 1)
        elif name == "--out":
            o.out = value(name)
        elif name in ("--no-nsys", "--no-loader", "--no-install"):
            setattr(o, {"--no-nsys": "nsys", "--no-loader": "loader", "--no-install": "install"}[name], False)
        elif name == "--resume":
            raise BadOption("--resume takes one folder and no other option")
        elif name in ("-h", "--help"):
            o.help = True
        elif name == "--":
            o.extra, args = args, []
        else:
            raise BadOption(f"unknown option: {name} (./run_all.sh --help lists the options)")
    if o.steps and nsys_steps and nsys_steps > o.steps:
        raise BadOption(f"--nsys-steps {nsys_steps} exceeds --steps {o.steps}")
    o.nsys_steps = nsys_steps or min(o.steps or 100, 10)
    if o.study == "infer":
        if o.gpus:
            raise BadOption("--study infer runs on one GPU: drop --gpus")
        if o.adaptive:
            o.repeat = 2  # two windows of whole seconds, in one process
    if o.variants.endswith(","):
        raise BadOption(f"--variants {o.variants}: an empty name after the last comma")
    if ",," in f",{o.variants},":
        raise BadOption(f"--variants {o.variants}: an empty name between commas")
    return o

# -----------------------------------------------------------------------------
# the runs: which, with which flags, in which order


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


def whole(path: Path) -> dict | None:
    """A record that reads back whole (only such a run counts as done), or None."""
    try:
        return records.read_json(path)
    except records.Malformed:
        return None


class Schedule:
    """Every run of a run_all.sh, in order: for each variant its unprofiled runs, its loader alone (part 2:
    its output processing alone) and its profiled run. Each is handed to `execute(kind, variant, what, log,
    flags)`, which runs it and says whether it succeeded; a variant whose run fails goes no further. What a
    resumed folder holds already is skipped, and `say` hears every line a user reads: the headings, a line a
    run with its figure and the time left, and the skips."""

    def __init__(self, out: Path, o: Options, gpu: bool, variants: list[str], execute, say=print,
                 setenv=os.environ.__setitem__):
        self.out, self.o, self.gpu, self.variants, self.execute, self.say = out, o, gpu, variants, execute, say
        self.setenv = setenv
        # every run to come, as (variant, kind), for the estimate of the time left (estimate_left)
        self.pending = [(v, kind) for v in variants
                        for kind in ["run"] * o.repeat + ["alone"] * self.alone(v) + ["nsys"] * o.nsys]
        self.total = len(self.pending)
        self.done = self.skipped = 0
        self.costs: dict[tuple[str, str], float] = {}  # (variant, kind) -> the seconds its last run took
        self.current = ""  # the variant now running
        self.nvtx_said = False
        self.last_end = time.monotonic()

    def alone(self, v: str) -> bool:
        """Whether the variant's pipeline is measured alone: a ceiling has none."""
        return self.o.loader and not v.startswith("ceiling")

    def flags(self, v: str) -> list[str]:
        """The study script's flags for a variant name: "ceiling" is the study's step with the batch on the
        GPU (part 2: the forward with its outputs left there), "ceiling-X" variant X's; then the flags after
        run_all.sh's --, which a ceiling's script leaves out, saying so, where they shape an input pipeline.
        Without a GPU: a small CPU run."""
        o, train = self.o, self.o.study == "train"
        on_gpu = ["--data-on-gpu", "--drop-pipeline-flags"] if train else ["--outputs-on-gpu"]
        if v == "ceiling":
            flags = ["--variant", "prefetch" if train else "baseline", *on_gpu]
        elif v.startswith("ceiling-"):
            flags = ["--variant", v.removeprefix("ceiling-"), *on_gpu]
        else:
            workers = o.workers if o.workers is not None or self.gpu else 2
            flags = ["--variant", v] + (["--workers", str(workers)] if workers is not None and v != "baseline" else [])
        if not self.gpu:
            flags += ["--img-size", "64", "--batch-size", "8" if train else "2", "--warmup", "2",
                      "--steps", str(o.steps or 5)]
        elif o.steps:
            flags += ["--steps", str(o.steps)]
        return flags

    def run(self) -> None:
        o = self.o
        alone = " + loader alone" if o.study == "train" else " + output processing alone"
        self.say(f"run_all: {len(self.variants)} variants x ({o.repeat} runs{alone if o.loader else ''}"
                 f"{' + 1 under nsys' if o.nsys else ''}) "
                 f"{f'on {o.gpus} GPUs (torchrun, DDP) ' if o.gpus else ''}into {self.out}")
        for i, v in enumerate(self.variants, 1):
            self.say(f"[{i}/{len(self.variants)}] {v}")
            self.current = v
            if (self.train_runs if o.study == "train" else self.infer_runs)(v):
                self.profile(v)

    def train_runs(self, v: str) -> bool:
        """Part 1: a process a run (under --gpus, a job), the loader alone next in run 1's process; then, where
        run 1's did not measure it, the loader alone in a process of its own. False once a run fails."""
        o, flags, out = self.o, self.flags(v), self.out
        loader, alone_done = out / f"{v}.loader.json", False
        for r in range(1, o.repeat + 1):
            record = out / f"{v}.run{r}.json"
            if whole(record):
                self.skip(f"run {r}/{o.repeat}")
                continue
            if o.adaptive and r == 3 and self.agreed(v):
                self.skip(f"runs 1 and 2 agree within {AGREE_TOLERANCE:.0%}: run 3 skipped", said=True)
                continue
            # the loader alone, next in run 1's process, on its workers: no process to start, no warm-up to repeat
            then_alone = r == 1 and self.alone(v) and not o.gpus and not whole(loader)
            json_at = out / f"{v}.{{}}.json" if then_alone else record
            if not self.call("run", v, f"run {r}", f"run{r}", [*flags, *["--then-alone"] * then_alone], json_at):
                return False
            self.progress(f"run {r}/{o.repeat}", record, ahead=then_alone)
            if then_alone:
                self.progress("loader alone", loader, same=True)
                alone_done = True
        if not self.alone(v) or alone_done:
            return True
        if whole(loader):
            self.skip("loader alone")
            return True
        # the input pipeline alone, in a process of its own (under --gpus one rank's loader; a resumed folder)
        if not self.call("py", v, "loader alone", "loader", [*flags, *self.sized(v)[0], "--loader-only"], loader):
            return False
        self.progress("loader alone", loader)
        return True

    def infer_runs(self, v: str) -> bool:
        """Part 2: the repeats, then output processing alone, in one process: its start-up, model and warm-up
        cost more than a window, and the alone rate comes from the very workers the variant ran on."""
        o = self.o
        names = [f"run{r}" for r in range(1, o.repeat + 1)] + ["output"] * self.alone(v)
        labels = [f"run {r}/{o.repeat}" for r in range(1, o.repeat + 1)] + ["output alone"] * self.alone(v)
        if all(whole(self.out / f"{v}.{name}.json") for name in names):
            for label in labels:
                self.skip(label)
            return True
        flags = [*self.flags(v), "--repeat", str(o.repeat), *["--then-alone"] * self.alone(v)]
        if not self.call("py", v, "its runs", "runs", flags, self.out / f"{v}.{{}}.json"):
            return False
        for k, (name, label) in enumerate(zip(names, labels)):
            self.progress(label, self.out / f"{v}.{name}.json", same=k > 0, ahead=len(names) - 1 - k)
        return True

    def profile(self, v: str) -> None:
        """The profiled run: on a GPU its last steps captured (--capture-range=cudaProfilerApi); on the CPU, all."""
        if not self.o.nsys:
            return
        done = self.out / "logs" / f"{v}.nsys.done"
        if done.exists():
            self.skip("nsys")
            return
        _, steps, capture = self.sized(v)
        capture = [*steps, "--profile", "nsys", "--profile-steps", str(capture)] if self.gpu else []
        if not self.call("nsys", v, "nsys", "nsys", [*self.flags(v), *capture], self.out / f"{v}.nsys.json"):
            return
        try:
            done.touch()
        except OSError:
            pass  # a full disk: the run is done, and --resume would only profile it again
        self.progress("nsys", self.out / f"{v}.nsys.json")
        record = whole(self.out / f"{v}.nsys.json") or {}
        if record.get("nvtx_backend") == "torch" and not self.nvtx_said:  # a harmless warning, said once a run
            self.say("    note: this nsys drops the nvtx package's ranges: they went through torch.cuda.nvtx, "
                     "without colours (docs/profiling.md)")
            self.setenv("NVTX_FALLBACK_SAID", "1")  # and the runs that follow no longer log it
            self.nvtx_said = True

    def call(self, kind: str, v: str, what: str, log: str, flags: list[str], record: Path) -> bool:
        """One process, logging to logs/VARIANT.LOG.log: the flags, then those after run_all.sh's -- (which
        override them), then the record's path."""
        return self.execute(kind, v, what, f"logs/{v}.{log}.log", [*flags, *self.o.extra, "--json", str(record)])

    def sized(self, v: str) -> tuple[list[str], list[str], int]:
        """Part 1 on a GPU without --steps: a window closed by time holds fewer steps at a slow variant, and
        the loader alone's and the profiled run's steps are sized to run 1's (after()); their flags, and the
        steps nsys records."""
        run1 = self.o.study == "train" and self.gpu and not self.o.steps and whole(self.out / f"{v}.run1.json")
        if not run1 or not isinstance(run1.get("steps"), int):
            return [], [], self.o.nsys_steps
        alone, profiled, capture = after(run1, self.o.nsys_steps)
        return ["--steps", str(alone)], ["--steps", str(profiled)], capture

    def agreed(self, v: str) -> bool:
        a, b = whole(self.out / f"{v}.run1.json"), whole(self.out / f"{v}.run2.json")
        try:
            return bool(a and b and agree(a, b))
        except (KeyError, TypeError):
            return False

    def ended(self, label: str, seconds: float | None) -> None:
        """A run of the current variant is over (seconds: what it took; None: skipped): off the pending list."""
        kind = "nsys" if label == "nsys" else "run" if label.startswith("run") else "alone"
        key = (self.current, kind)
        if key in self.pending:
            self.pending.remove(key)
        if seconds is not None:
            self.costs[key] = seconds

    def estimate_left(self, ahead: int) -> int:
        """Seconds left: each run to come costs what the variant's last run of its kind took (an unprofiled
        run, the loader alone, an nsys run), else what that kind took on average so far, else an unprofiled
        run's average (windows close by time, so runs cost about the same whatever the variant's speed; a
        compile or nsys costs more, and shows once one has run). `ahead`: runs of the process just ended,
        done already."""
        def mean(xs: list[float]) -> float:
            return sum(xs) / len(xs) if xs else 0.0
        seen = {k: [s for (_, kind), s in self.costs.items() if kind == k] for k in ("run", "alone", "nsys")}
        # the runs of the process just ended: the current variant's last ones before its nsys run
        mine = [i for i, (v, kind) in enumerate(self.pending) if v == self.current and kind != "nsys"]
        done = set(mine[len(mine) - ahead:]) if ahead else set()
        left = 0.0
        for i, (v, kind) in enumerate(self.pending):
            if i not in done:
                left += self.costs.get((v, kind), mean(seen[kind]) if seen[kind] else mean(seen["run"]))
        return int(left)

    def skip(self, label: str, said: bool = False) -> None:
        """A run that a resumed folder holds already (or, said, one the policy leaves out)."""
        self.done, self.skipped, self.last_end = self.done + 1, self.skipped + 1, time.monotonic()
        self.ended(label, None)
        self.say(f"    {label}" if said else f"    {label} (already done)")

    def progress(self, label: str, path: Path, same: bool = False, ahead: int = 0) -> None:
        """A run has ended: its figure, its seconds (same: its record came from the process before, whose line
        gave them) and the time left (estimate_left). `ahead` records more of the same process come next."""
        now = time.monotonic()
        spent = "same process" if same else f"{int(now - self.last_end)} s"
        self.ended(label, 0.0 if same else now - self.last_end)
        self.last_end, self.done = now, self.done + 1
        record = whole(path)
        try:
            # README: a CPU run's rates say nothing of a GPU's (results.md leaves them out), so each is marked
            shown = figure(record) + ("" if self.gpu else " (CPU: not a GPU figure)") if record else "done"
        except (KeyError, TypeError):
            shown = "done"
        left = self.estimate_left(ahead)
        self.say(f"    {label:<10} {shown}  [{self.done}/{self.total} runs, {spent}, "
                 f"about {left // 60} min {left % 60:02d} s left]")


def converse(out: str, gpu: bool, nsys: bool, variants: list[str], argv: list[str]) -> int:
    """`schedule`: the Schedule, its requests written to run_all.sh (stdout), its answers read (stdin). `nsys`:
    whether run_all.sh found nsys (without it, no profiled runs, whatever the options say)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is run_all.sh's to handle: it stops the run under way

    def send(*fields) -> None:
        print(*fields, sep="\t", flush=True)

    def execute(kind: str, v: str, what: str, log: str, flags: list[str]) -> bool:
        send(kind, v, what, log, *flags)
        answer = sys.stdin.readline()
        if not answer:  # run_all.sh has gone (interrupted): nothing more to plan
            sys.exit(0)
        return answer.strip() == "0"

    o = parse_options(argv)
    o.nsys = o.nsys and nsys
    Schedule(Path(out), o, gpu, variants, execute, lambda text: send("say", text),
             lambda name, value: send("env", name, value)).run()
    return 0

# -----------------------------------------------------------------------------
# the facts around the runs

# the summaries nsys stats writes for analyze.py and compare.py, each by its names across nsys versions;
# the CUDA ones only with a GPU
REPORTS = (("nvtx_sum", "nvtxsum"), ("osrt_sum", "osrtsum"))
CUDA_REPORTS = (("cuda_gpu_kern_sum", "gpukernsum"), ("cuda_gpu_mem_time_sum", "gpumemtimesum"),
                ("cuda_gpu_mem_size_sum", "gpumemsizesum"), ("cuda_api_sum", "cudaapisum"))


def reports(help_reports: str, gpu: bool) -> list[str]:
    """From `nsys stats --help-reports`: each wanted report by the first of its names this nsys knows."""
    known = {line.split()[0].split("[")[0] for line in help_reports.splitlines()
             if line.startswith("  ") and line[2:3].isalpha()}
    return [next(n for n in names if n in known) for names in REPORTS + CUDA_REPORTS * gpu
            if any(n in known for n in names)]


def make_folder(out: str) -> None:
    """A new run folder and its logs/, or BadOption: runs are never overwritten."""
    if os.path.lexists(out):
        raise BadOption(f"{out} exists: runs are never overwritten; pick another --out")
    try:
        os.makedirs(os.path.join(out, "logs"))
    except OSError as e:
        raise BadOption(f"--out {out} cannot be made: {e.strerror}") from None


def start_folder(out: str, new: bool, facts_json: str, nsys: str, gpu: str, gpus: str, study: str,
                 variants: list[str], argv: list[str]) -> None:
    """The folder's INCOMPLETE marker ("running since ...") and, for a new run, env.json: the machine (the
    facts' line), this run's study, variants and options, which --resume reads. Each written whole; if one
    cannot be, BadOption names it and why, and a folder this run made is removed again, as nothing of the
    run is recorded yet."""
    now = datetime.datetime.now(datetime.timezone.utc)
    try:
        records.write_whole(os.path.join(out, "INCOMPLETE"), f"running since {now:%Y-%m-%dT%H:%M:%SZ}\n")
        if new:
            records.write_json(os.path.join(out, "env.json"), dict(
                gpu=gpu, gpus=int(gpus), study=study, variants=variants, **json.loads(facts_json), nsys=nsys or None,
                argv=argv, date=f"{now:%Y-%m-%d %H:%M} UTC"))
    except OSError as e:
        if new:
            shutil.rmtree(out, ignore_errors=True)
        why = "the disk is full" if e.errno == errno.ENOSPC else e.strerror
        raise BadOption(f"cannot write {os.path.basename(e.filename)} into {out} ({why})"
                        + (": the folder is removed again" if new else "")) from None


def resumable(run_dir: Path, study: str, gpus: int, variants: list[str], gpu: str | None = None) -> str | None:
    """Why a run folder cannot be resumed with the options its env.json recorded (their study, GPUs and
    variants, as this run_all.sh reads them) on this machine (gpu: its GPU's name), or None: the options,
    env.json, the records and the GPU must agree, or the records of one run would be finished as another's."""
    try:
        env = records.read_json(run_dir / "env.json")
        if gpu is not None and env.get("gpu") != gpu:
            return f"that run was on {env['gpu']}, this machine has {gpu}" if env.get("gpu") else \
                "its env.json names no GPU"
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
    try:
        if command == "options":
            print(parse_options(args).shell())
        elif command == "make-folder":
            make_folder(args[0])
        elif command == "start-folder":
            cut = args.index("--")
            start_folder(args[0], args[1] == "1", *args[2:7], args[7:cut], args[cut + 1:])
        elif command == "schedule":
            cut = args.index("--")
            return converse(args[0], args[1] == "1", args[2] == "1", args[3:cut], args[cut + 1:])
        elif command == "reports":
            print(",".join(reports(sys.stdin.read(), args[0] == "1")))
        elif command == "missing":  # found without importing them: torch takes seconds
            lacks = [m for m in ("torch", "torchvision", "nvtx", "matplotlib") if importlib.util.find_spec(m) is None]
            print(", ".join(lacks))
            return 3 if lacks else 0
        elif command == "resumable":
            why = resumable(Path(args[0]), args[1], int(args[2]), args[4:], args[3])
            if why:
                print(why)
            return 1 if why else 0
        else:
            print(f"starvation.plan: unknown command {command!r}", file=sys.stderr)
            return 2
    except BadOption as e:
        print(f"run_all: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
