import os
import shutil
import signal
import subprocess
import tempfile
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(ROOT))
# a test run that a shell without job control started in the background inherits SIGINT ignored, and
# so would every script it starts: the Ctrl-C tests need SIGINT delivered
signal.signal(signal.SIGINT, signal.default_int_handler)

# train.py --jpeg makes its default set of photos in the cache: the tests' own, not the user's
os.environ["XDG_CACHE_HOME"] = os.path.join(tempfile.gettempdir(), f"gpu-starvation-tests-{os.getuid()}")

# each job of tests/jobs: the verdict it was written to have, and what the change it names must say
WRITTEN_TO = {
    "single_process": ("loading-bound", "num_workers"),
    "few_workers": ("loading-bound", "num_workers"),
    "pageable_copy": ("synchronous pageable copy", "pin_memory=True"),
    "item_sync": ("a sync every step", "no sync in the loop"),
    "decode_jpeg": ("loading-bound", "num_workers"),
    "gpu_bound": ("GPU-bound", "look at the model"),
    "launch_bound": ("launch-bound", "torch.compile"),
}


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: runs whole scripts end to end, for minutes (tests/run.sh -m 'not e2e' "
                                       "leaves them out)")
    config.addinivalue_line("markers", "xdist_group(name): tests that pytest-xdist runs on one worker")
    # said once in requirements.txt (torchvision is bounded below the release that may remove them), not 200 times
    config.addinivalue_line("filterwarnings", "ignore:The image decoding and encoding capabilities of TorchVision "
                                              "are deprecated:DeprecationWarning")
    # the tests ask for more workers than a 2-core machine has on purpose; train.py itself says it once
    config.addinivalue_line("filterwarnings", "ignore:This DataLoader will create:UserWarning")


def pytest_collection_modifyitems(items):
    """tests/run.sh runs the tests in several processes (pytest-xdist, --dist loadgroup): those that run nsys
    take turns on one of them, as two nsys sessions at once can fail."""
    for item in items:
        if "nsys" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("nsys"))


TINY = ["--device", "cpu", "--img-size", "32", "--batch-size", "4", "--steps", "3", "--warmup", "1"]


def run_script(*args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run one of the project's scripts as a user would; returns the finished process."""
    cmd = [sys.executable, *args] if args[0].endswith(".py") else list(args)
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def run_profiled(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """run_script for a command that runs `nsys profile` (with --force-overwrite=true, for what the first try
    left): run once more when it fails, as run_all.sh does, for nsys 2023.4 at times fails by itself on a
    loaded machine, in words that vary (it loses its agent, for one); a second failure is the test's."""
    p = run_script(*args, **kwargs)
    return run_script(*args, **kwargs) if p.returncode != 0 else p


def failing_nsys(path: Path, nsys: str, fails: int, words: str, status: int = 1, after: bool = False) -> Path:
    """An nsys at `path` whose first `fails` profiles fail with `words` and exit `status` (0: with no report), as
    nsys 2023.4 at times does by itself: at start-up, or with `after` once the job has run and its report is due
    (the real nsys profiles it, and its report is deleted).
    The real nsys gets three tries wherever it runs, so that a fault of its own on a loaded machine (CI's) is
    not taken for the fault under test: with `after`, a real nsys that failed at start-up would make a failure
    "before the job started" of what must be one after it."""
    count = path.parent / f"{path.name}.failures"
    run_first = (f'for a in "$@"; do [ "$prev" = -o ] && report="$a.nsys-rep"; prev="$a"; done\n'
                 f'  for try in 1 2 3; do {nsys} "$@"; [ -e "$report" ] && break; done; rm -f "$report"'
                 if after else "")
    path.write_text(f"""#!/usr/bin/env bash
if [ "$1" = profile ] && [ "$(cat {count} 2>/dev/null | wc -c)" -lt {fails} ]; then
  printf x >> {count}
  {run_first}
  echo "{words}" >&2
  exit {status}
fi
for try in 1 2 3; do {nsys} "$@" && exit 0; done
exit 1
""")
    path.chmod(0o755)
    return path


@pytest.fixture(scope="session")
def nsys() -> str:
    """The nsys binary: on PATH (tests/run.sh puts tools/nsys there). CI must have it."""
    path = shutil.which("nsys")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("nsys not on PATH in CI: tests/run.sh should have fetched it with tools/get_nsys.sh")
        pytest.skip("nsys not on PATH (tools/get_nsys.sh fetches it)")
    return path


def refusal(capsys, script: str, *args: str) -> tuple[int, str]:
    """A script's refusal of its flags, in-process (no interpreter to start, no torch to import): its exit
    status and the error line, from parsing them or from opening what they name (train.py's prepare). A
    refusal is that line and one line of hint, nothing more."""
    import importlib
    module = importlib.import_module(script.removesuffix(".py"))
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        cfg = module.parse_config(list(args))
        if hasattr(module, "prepare"):
            module.prepare(cfg)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and lines[1] == f"(python {script} --help lists every flag)", lines
    return e.value.code, lines[0]
