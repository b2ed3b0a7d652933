"""The house's rules, read from the code itself: every import of every module (those inside
functions included) forms a graph with no circle, and every arrow points the way the flow goes:
pages -> crew -> tools -> runtime -> core; inside core, from a later stage to an earlier one;
templates at the bottom, importing only their common package, image I/O and the evaluators."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "runtime", "tools", "crew", "pages", "ml_templates", "bench")
# core's stage packages, in the order data flows through them: each may import only those
# before it (and itself)
CORE_ORDER = ("config", "imaging", "privacy", "store", "datasets", "jobs", "planning",
              "evaluation", "training", "viewing", "external_validation")
CORE_SIDE = {"demo": {"config", "imaging"}}  # demo data: generators on image I/O only
# what each top-level part may import of the project
ALLOWED_TOP = {
    "pages": {"pages", "core", "runtime", "crew"},
    "app": {"core", "pages"},
    "crew": {"crew", "tools", "runtime", "core", "bench"},  # `crew bench` runs the suite
    "tools": {"tools", "runtime", "core", "ml_templates"},
    "runtime": {"runtime", "core"},
    "core": {"core", "ml_templates"},
    "bench": {"bench", "core", "tools"},
    "ml_templates": {"ml_templates", "core"},
}
TEMPLATE_CORE = ("core.imaging", "core.evaluation")
TEMPLATE_ENTRY_POINTS = ("train", "nnunet_train", "check_dataloader")


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    found = {module_name(ROOT / "app.py"): ROOT / "app.py"}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[module_name(path)] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(imported project module, line, inside a function) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    lazy_lines = {n.lineno for f in ast.walk(tree)
                  if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    out = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.append((target, node.lineno, node.lineno in lazy_lines))
    return out


@pytest.fixture(scope="module")
def graph():
    modules = project_modules()
    return modules, {name: imports_of(name, path, modules) for name, path in modules.items()}


def top(name: str) -> str:
    return name.split(".")[0]


def core_stage(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "core" and len(parts) > 1 else None


def test_no_module_sits_directly_in_core():
    loose = sorted(p.name for p in (ROOT / "core").glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"modules directly in core/: {loose}; give each a stage package"
    for folder in (p for p in (ROOT / "core").iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert folder.name in CORE_ORDER or folder.name in CORE_SIDE, folder
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
        assert doc and "import" in doc, f"{folder}/__init__.py must say what may be imported"


def test_no_import_circles(graph):
    """Lazy imports count: an import moved into a function to dodge a circle is a circle."""
    _, edges = graph
    index, low, on_stack, stack, circles = {}, {}, set(), [], []
    counter = [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w, _, _ in edges.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    import sys
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10000))
    try:
        for v in sorted(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    assert circles == [], f"import circles: {circles}"


def test_arrows_follow_the_flow(graph):
    _, edges = graph
    wrong = []
    for source, targets in edges.items():
        for target, line, _lazy in targets:
            where = f"{source}:{line} -> {target}"
            s_top, t_top = top(source), top(target)
            if t_top not in ALLOWED_TOP[s_top]:
                wrong.append(f"{where}: {s_top} may not import {t_top}")
                continue
            if s_top == "ml_templates" and t_top == "core" and (
                    not target.startswith(TEMPLATE_CORE) or target == "core.evaluation.step"):
                wrong.append(f"{where}: templates import only core.imaging and the evaluators")
            if s_top == "core" and t_top == "ml_templates":
                if core_stage(source) not in ("viewing", "planning") or \
                        target.rsplit(".", 1)[-1] in TEMPLATE_ENTRY_POINTS:
                    wrong.append(f"{where}: core reaches templates only through their "
                                 "model/inference modules, from viewing")
            s_stage, t_stage = core_stage(source), core_stage(target)
            if s_stage and t_stage and s_stage != t_stage:
                if s_stage in CORE_SIDE:
                    if t_stage not in CORE_SIDE[s_stage]:
                        wrong.append(f"{where}: core.{s_stage} may import only "
                                     f"{sorted(CORE_SIDE[s_stage])}")
                elif t_stage in CORE_SIDE or \
                        CORE_ORDER.index(t_stage) > CORE_ORDER.index(s_stage):
                    wrong.append(f"{where}: core.{s_stage} comes before core.{t_stage}")
    assert wrong == [], "\n".join(wrong)


def test_core_imports_no_ui_or_agents():
    for path in (ROOT / "core").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for n in names:
                assert n.split(".")[0] not in ("streamlit", "crewai", "litellm"), (path, n)


def test_the_check_sees_lazy_imports_and_circles(tmp_path):
    """The walker itself: a function-level import is an arrow, and a two-module circle made of
    one lazy import is found."""
    modules = {"core.a": tmp_path / "a.py", "core.b": tmp_path / "b.py"}
    modules["core.a"].write_text("from core.b import x\n")
    modules["core.b"].write_text("def f():\n    from core.a import y\n")
    edges_b = imports_of("core.b", modules["core.b"], modules)
    assert edges_b == [("core.a", 2, True)]
    assert imports_of("core.a", modules["core.a"], modules) == [("core.b", 1, False)]
