"""The house's rules, read from the source: the package never imports an entry script, and no import,
at the top of a file or inside a function, closes a cycle."""
import ast

from conftest import ROOT

ENTRY_SCRIPTS = {"train", "infer", "analyze", "compare"}


def local_imports() -> dict[str, set[str]]:
    """Each of the project's modules (entry scripts and starvation.*) and the project's modules it imports."""
    files = {p.stem: p for p in ROOT.glob("*.py")} | {
        f"starvation.{p.stem}": p for p in (ROOT / "starvation").glob("*.py") if p.stem != "__init__"}
    graph = {}
    for name, path in files.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}  # from starvation import photos
        graph[name] = {m for m in found if m in files and m != name}
    return graph


def test_the_package_imports_no_entry_script():
    for name, imported in local_imports().items():
        if name.startswith("starvation."):
            assert not imported & ENTRY_SCRIPTS, f"{name} imports {imported & ENTRY_SCRIPTS}"


def test_no_import_cycle():
    graph = local_imports()

    def visit(name: str, path: list[str]) -> None:
        for other in graph[name]:
            assert other not in path, "import cycle: " + " -> ".join(path[path.index(other):] + [other])
            visit(other, path + [other])
    for name in graph:
        visit(name, [name])


def test_entry_scripts_import_the_package_not_each_other():
    for name, imported in local_imports().items():
        if name in ENTRY_SCRIPTS:
            assert not imported & ENTRY_SCRIPTS, f"{name} imports {imported & ENTRY_SCRIPTS}"


# the live pipeline: what train.py and infer.py import to run; the analysis (trace, verdict, records, plan)
# reads what they wrote, offline, and may change without touching a run
LIVE = {"starvation.data", "starvation.pool", "starvation.photos", "starvation.folder", "starvation.resize",
        "starvation.decoders", "starvation.nvjpeg", "starvation.cache", "starvation.sources",
        "starvation.measure", "starvation.settings", "starvation.cli", "starvation.runtime", "starvation.survey",
        "starvation.ddp", "starvation.profiling", "starvation.ranges", "starvation.thresholds", "starvation.writes"}
ANALYSIS = {"starvation.verdict", "starvation.plan", "starvation.records", "starvation.trace"}


def test_the_live_pipeline_imports_no_analysis():
    graph = local_imports()

    def reach(name: str, seen: set) -> set:
        for other in graph.get(name, ()):
            if other not in seen:
                seen.add(other)
                reach(other, seen)
        return seen
    for name in LIVE | {"train", "infer"}:
        assert not reach(name, set()) & ANALYSIS, f"{name} reaches {reach(name, set()) & ANALYSIS}"
    package = {name for name in graph if name.startswith("starvation.")}
    assert package <= LIVE | ANALYSIS | {"starvation"}, f"a module in neither layer: {package - LIVE - ANALYSIS}"
