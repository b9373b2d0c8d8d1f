"""
How every file the tools write is written: whole or not at all, and a record in its schema. Torch-free and
apart from the analysis (records.py reads what this writes), so that a run imports nothing of it.
"""
import contextlib
import json
import os


# -----------------------------------------------------------------------------
# writing


def write_whole(path, data: str | bytes) -> None:
    """Whole or not at all: a reader never sees half a file, and a failed write (a full disk) leaves none. A
    link is followed, so that its target is what changes; a pipe or another file that is not a regular one
    (/dev/stdout, a shell's >(...)) is written directly, as it cannot be replaced. OSError names the path."""
    mode = "wb" if isinstance(data, bytes) else "w"
    try:
        # asked of the path itself: a shell's >(...) is /dev/fd/N, whose real path (pipe:[...]) is no file
        if os.path.exists(path) and not os.path.isfile(path):
            with open(path, mode) as f:
                f.write(data)
            return
        target = os.path.realpath(path)
        tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.tmp{os.getpid()}")
        try:
            with open(tmp, mode) as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())  # on the disk before the rename makes it the file
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(OSError):
                os.remove(tmp)
    except OSError as e:  # a write on a full disk says which file it was not
        raise OSError(e.errno, e.strerror, str(path)) from None


def write_json(path, record) -> None:
    write_whole(path, json.dumps(record, indent=2) + "\n")


# -----------------------------------------------------------------------------
# the records' schema: every record a script writes carries its version, and part 2's (infer.py's) name
# their figures in part 2's words. The window's figures are computed once, in part 1's words (measure.py),
# and renamed here on their way to the file and back, so that compare.py and the verdicts read one set.

SCHEMA = 2  # schema 1: part 2's records in part 1's words (steps_per_s for its batches/s, ...)
PART2_WORDS = {  # part 1's name: part 2's
    "steps": "batches", "steps_per_s": "batches_per_s", "steps_per_s_second_half": "batches_per_s_second_half",
    "steps_per_s_halves": "batches_per_s_halves", "slid_steps": "slid_batches", "profiled_steps": "profiled_batches",
    "profiled_steps_per_s": "profiled_batches_per_s", "step_ms_median": "batch_ms_median",
    "step_ms_min": "batch_ms_min", "step_ms_max": "batch_ms_max", "step_ms_p10": "batch_ms_p10",
    "step_ms_p90": "batch_ms_p90", "data_wait_ms_median": "output_path_ms_median",
    "data_wait_ms_mean": "output_path_ms_mean", "data_wait_ms_p90": "output_path_ms_p90",
    "data_wait_share": "output_path_share", "data_on_gpu": "outputs_on_gpu",
}
PART1_WORDS = {part2: part1 for part1, part2 in PART2_WORDS.items()}


def for_file(record: dict) -> dict:
    """A record as a script writes it: the schema's version first, in part 2's words when it is part 2's."""
    words = PART2_WORDS if record.get("study") == "infer" else {}
    return {"schema": SCHEMA, **{words.get(k, k): v for k, v in record.items()}}
