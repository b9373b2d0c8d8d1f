"""
A run folder, read (starvation/writes.py writes every file whole or not at all, and a record in its schema).
Read: env.json, each variant's records (its unprofiled runs, its loader or output
processing alone, its profiled run), failures.tsv and analyze.py's diagnosis.json, each checked against
its schema before anything uses it, so that a malformed file is one line naming the field. And the
rates a variant's verdict weighs, from them.
"""
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from starvation.verdict import TRACE_CAUSES, Rates
from starvation.writes import PART1_WORDS, PART2_WORDS, SCHEMA, for_file, write_json, write_whole  # noqa: F401


class Malformed(Exception):
    """A file that exists but cannot be read as what it should be."""


# -----------------------------------------------------------------------------
# reading a run folder

def read_json(path: Path) -> dict:
    try:
        with open(path) as f:
            record = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise Malformed(f"{path}: not valid JSON ({e})") from None
    except RecursionError:
        raise Malformed(f"{path}: nested too deep to be a record") from None
    except OSError as e:
        raise Malformed(f"{path}: cannot be read ({e.strerror})") from None
    if not isinstance(record, dict):
        raise Malformed(f"{path}: expected a JSON object")
    return record


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


KINDS = {  # what a field must hold, by the words the error uses
    "a number": _number,
    "a positive number": lambda x: _number(x) and x > 0,
    "a positive integer": lambda x: isinstance(x, int) and not isinstance(x, bool) and x > 0,
    "an integer": lambda x: isinstance(x, int) and not isinstance(x, bool),
    "true or false": lambda x: isinstance(x, bool),
    "a string": lambda x: isinstance(x, str),
    "an object": lambda x: isinstance(x, dict),
    "a list": lambda x: isinstance(x, list),
    "a list of strings": lambda x: isinstance(x, list) and all(isinstance(s, str) for s in x),
    "train or infer": lambda x: x in ("train", "infer"),
    "a number or null": lambda x: x is None or _number(x),
    "a string or null": lambda x: x is None or isinstance(x, str),
}
# the nested fields compare.py reads in a diagnosis.json entry, {k}: h2d or d2h (train.py's copies, or infer.py's)
NESTED = {
    "per_step": {"{k}_ms": "a number", "{k}_gb_per_s": "a number or null", "kernel_ms": "a number",
                 "{k}_pageable_copies": "a number", "{k}_pinned_copies": "a number"},
    "metrics": {"gpu_idle_pct": "a number or null", "{k}_overlap_pct": "a number or null"},
    "trace": {"verdict": "a string", "why": "a string", "cause": "a string or null"},
}
# one schema for every file compare.py reads: the keys it needs, then those it reads when present (null allowed)
SCHEMAS = {
    "run": ({"steps_per_s": "a positive number", "images_per_s": "a positive number", "compute_key": "a string",
             "data_on_gpu": "true or false", "steps": "a positive integer", "warmup": "an integer"},
            {"steps_per_s_second_half": "a positive number", "data_wait_ms_median": "a number",
             "data_wait_ms_mean": "a number", "data_wait_share": "a number", "data_wait_ms_p90": "a number",
             "fell_behind": "true or false", "slid_steps": "an integer", "settled": "true or false",
             "settings": "an object", "world_size": "a positive integer",
             "ranks": "a list"}),
    "loader": ({"loader_batches_per_s": "a positive number"}, {"workers_batches_per_s": "a positive number"}),
    "output": ({"output_batches_per_s": "a positive number"}, {}),
    "profiled": ({"steps_per_s": "a positive number"},
                 {"profiled_steps_per_s": "a positive number", "profiled_steps": "a positive integer"}),
    "env": ({"gpu": "a string"}, {"variants": "a list of strings", "gpus": "a positive integer",
                                  "study": "train or infer"}),
    "diagnosis": ({"verdict": "a string", "why": "a string", "change": "a string", "metrics": "an object"},
                  {"problems": "a list", "per_step": "an object", "trace": "an object"}),
}


def from_file(record: dict, path: Path) -> dict:
    """A record as compare.py reads it, in part 1's words, once it is of this schema."""
    if record.get("schema") != SCHEMA:
        raise Malformed(f"{path}: a record of schema {record.get('schema', 1)}, and compare.py reads schema {SCHEMA} "
                        "(part 2's fields in its own words): run the variant again with today's scripts")
    words = PART1_WORDS if record.get("study") == "infer" else {}
    return {words.get(k, k): v for k, v in record.items()}


def checked_diagnosis(entry: dict, name: str, path: Path, copies: str) -> dict:
    """A diagnosis.json entry whose nested fields hold what they should; else one line naming the field."""
    checked(entry, "diagnosis", path)
    for part, fields_ in NESTED.items():
        if entry.get(part) is None:
            continue
        for key, kind in fields_.items():
            key = key.format(k=copies.lower())
            if part == "metrics" and entry["metrics"].get("gpu_idle_pct") is None and key != "gpu_idle_pct":
                continue  # a CPU trace: no copies to measure
            if key not in entry[part]:
                raise Malformed(f"{path}: '{name}.{part}' has no key '{key}'")
            if not KINDS[kind](entry[part][key]):
                raise Malformed(f"{path}: '{name}.{part}.{key}' should be {kind}, got {json.dumps(entry[part][key])}")
    return entry


def checked(record: dict, schema: str, path: Path) -> dict:
    """The record, once every field compare.py reads holds what it should; else one line naming it."""
    needed, optional = SCHEMAS[schema]
    if schema in ("run", "loader", "output", "profiled"):
        record = from_file(record, path)
    named = (lambda key: PART2_WORDS.get(key, key)) if record.get("study") == "infer" else (lambda key: key)
    for key, kind in needed.items():
        if key not in record:
            raise Malformed(f"{path}: no key '{named(key)}'")
    for key, kind in {**optional, **needed}.items():
        value = record.get(key)
        if (key in needed or value is not None) and not KINDS[kind](value):
            raise Malformed(f"{path}: '{named(key)}' should be {kind}, got {json.dumps(value)}")
    return record


@dataclass
class Variant:
    name: str
    runs: list[dict] = field(default_factory=list)
    loader: dict | None = None  # the loader alone (train.py --loader-only; infer.py --output-only: processing alone)
    profiled: dict | None = None
    failures: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what its report lacks
    diagnosis: dict | None = None  # analyze.py's summary of its report, when the run folder has diagnosis.json

    def median(self, key: str) -> float | None:
        return statistics.median(r[key] for r in self.runs) if self.runs else None

    @property
    def compute_key(self) -> str | None:
        return self.runs[0]["compute_key"] if self.runs else None

    @property
    def is_ceiling(self) -> bool:
        records = self.runs or ([self.profiled] if self.profiled else [])
        return bool(records and records[0]["data_on_gpu"])

    @property
    def alone(self) -> float | None:
        """Batches/s of the loader alone (part 1) or of output processing alone (part 2)."""
        if self.loader is None:
            return None
        return self.loader.get("loader_batches_per_s") or self.loader.get("output_batches_per_s")

    @property
    def trace(self) -> dict | None:
        """What its trace alone says (analyze.verdict); a diagnosis.json from before decide() held only that."""
        d = self.diagnosis
        if d is None or "error" in d:
            return None
        return d.get("trace") or dict(verdict=d["verdict"], why=d["why"], cause=TRACE_CAUSES.get(d["verdict"]))


@dataclass
class Run:
    path: Path
    env: dict
    variants: list[Variant]
    incomplete: bool
    diagnosis: dict | None = None  # analyze.py's diagnosis.json: one entry per report (per rank under torchrun)

    @property
    def diagnosed(self) -> bool:
        return self.diagnosis is not None

    @property
    def copies(self) -> str:
        return copies_of(self.study)

    @property
    def study(self) -> str:
        return self.env.get("study") or "train"

    @property
    def world_size(self) -> int:
        return max((r.get("world_size", 1) for v in self.variants for r in v.runs), default=1)


def copies_of(study: str) -> str:
    """The copies a study is about: to the device (train.py), or back to the host (infer.py)."""
    return "D2H" if study == "infer" else "H2D"


def profile_base(run_dir: Path, name: str) -> str:
    """The file stem of a variant's profile: VARIANT, or VARIANT.rank0 when each rank wrote its own."""
    ranked = f"{name}.rank0"
    return ranked if not (run_dir / f"{name}.nsys-rep").exists() and (run_dir / f"{ranked}.nsys-rep").exists() else name


def load_variant(run_dir: Path, name: str, diagnosis: dict | None, diagnosis_path: Path,
                 study: str = "train") -> Variant:
    v = Variant(name)
    for path in sorted(run_dir.glob(f"{name}.run*.json")):
        v.runs.append(checked(read_json(path), "run", path))
        if v.runs[-1].get("study", "train") != study:
            raise Malformed(f"{path}: a record of {v.runs[-1].get('study', 'train')}.py's study in a folder of "
                            f"{study}.py's (env.json): one study per table")
    for kind in ("loader", "output"):
        if (alone := run_dir / f"{name}.{kind}.json").exists():
            v.loader = checked(read_json(alone), kind, alone)
    profiled = run_dir / f"{name}.nsys.json"
    if profiled.exists():
        v.profiled = checked(read_json(profiled), "profiled", profiled)
    base = profile_base(run_dir, name)
    if not (run_dir / f"{base}.nsys-rep").exists():
        v.problems = ["no nsys report"]
    elif diagnosis is not None:
        v.diagnosis = diagnosis.get(base)
        if v.diagnosis is None:
            v.problems = [f"no diagnosis of {base}.nsys-rep in diagnosis.json"]
        elif "error" in v.diagnosis:
            v.problems = [v.diagnosis["error"].split(": ", 1)[-1]]  # its path is the run folder's
        else:
            checked_diagnosis(v.diagnosis, base, diagnosis_path, copies_of(study))
            v.problems = v.diagnosis.get("problems") or []
    return v


def load_run(run_dir: Path) -> Run:
    env_path = run_dir / "env.json"
    if not env_path.exists():
        raise Malformed(f"{run_dir}: no env.json; is this a folder written by run_all.sh?")
    env = checked(read_json(env_path), "env", env_path)
    names = list(env.get("variants") or sorted({p.name.split(".")[0] for p in run_dir.glob("*.run*.json")}))
    failures: dict[str, list[str]] = {}
    failures_path = run_dir / "failures.tsv"
    if failures_path.exists():
        try:
            lines = failures_path.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise Malformed(f"{failures_path}: cannot be read ({e})") from None
        for line in lines:
            parts = line.split("\t")
            if len(parts) != 3:
                raise Malformed(f"{failures_path}: expected 'variant<TAB>what<TAB>log' lines, got {line!r}")
            failures.setdefault(parts[0], []).append(parts[1])
    diagnosis_path = run_dir / "diagnosis.json"
    diagnosis = read_json(diagnosis_path) if diagnosis_path.exists() else None
    if diagnosis is not None and not isinstance(diagnosis, dict):
        raise Malformed(f"{diagnosis_path}: expected a JSON object")
    variants = []
    for name in names:
        v = load_variant(run_dir, name, diagnosis, diagnosis_path, env.get("study", "train"))
        v.failures = failures.get(name, [])
        variants.append(v)
    marker = run_dir / "INCOMPLETE"  # run_all.sh writes "finishing" in it while it writes the table
    incomplete = marker.exists() and not (marker.is_file() and
                                          marker.read_text(errors="replace").startswith("finishing"))
    return Run(run_dir, env, variants, incomplete, diagnosis)


def ceiling_for(v: Variant, variants: list[Variant]) -> Variant | None:
    for c in variants:
        if c.is_ceiling and c.runs and c.compute_key == v.compute_key:
            return c
    return None


def rates(v: Variant, run: Run) -> Rates | None:
    """What decide() weighs for a variant: its medians, its ceiling's, its alone rates, its settings."""
    if not v.runs:
        return None
    ceil = ceiling_for(v, run.variants)
    waits = [r["data_wait_share"] for r in v.runs if r.get("data_wait_share") is not None]
    return Rates(study=run.study, rate=v.median("steps_per_s"), ceiling=ceil.median("steps_per_s") if ceil else None,
                 alone=v.alone, workers_alone=(v.loader or {}).get("workers_batches_per_s"),
                 wait_share=statistics.median(waits) if len(waits) == len(v.runs) else None,
                 settings=v.runs[0].get("settings") or {}, cpus=v.runs[0].get("cpu_count"), is_ceiling=v.is_ceiling,
                 batch=(v.runs[0].get("settings") or {}).get("batch_size"), photos=v.runs[0].get("photos"),
                 decode_thread=v.runs[0].get("decode_thread"))
