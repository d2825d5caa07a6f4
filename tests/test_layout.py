"""The package's layout: rooms by job, imports that only run downward.

Every `import` in `flashspec/` (at the top of a module or inside a function) is read; the test fails on an
import circle, on an arrow that climbs from a lower floor to a higher one, and on a private name imported
from another module. The floors are the house's plan (README, *Where to start reading*).
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT/"flashspec"

# lowest first; a module may import only from floors below its own
FLOORS = [
    ("util",),
    ("data", "target"),
    ("tree",),
    ("verify", "kvcache"),
    ("kernel.build",), ("kernel.formats",), ("kernel.products", "kernel.layers"),
    ("engine",),
    ("quant",),
    ("drafters.base",), ("drafters.slice", "drafters.lookup"),
    ("drafters.feature", "drafters.merged", "drafters.adaptive"), ("drafters.weights",),
    ("decode.loop",), ("decode.fused",), ("decode.batch",), ("decode.monitor",),
    ("tune",),
    ("api",),
    ("train.answers",), ("train.distill",), ("train.features",),
    ("train.ttt", "train.acceptance", "train.export"),
    ("bench",),
    ("cli.options",), ("cli.bench", "cli.distill", "cli.export"), ("cli.main",),
    ("__init__", "__main__"),
]
FLOOR = {m: i for i, ms in enumerate(FLOORS) for m in ms}
PACKAGES = {"kernel", "drafters", "decode", "train", "cli"}  # their __init__ imports nothing

def modules():
    "`{module name: path}` of every module of the package (`_modidx` aside)."
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG).with_suffix("")
        if rel.name == "_modidx": continue
        name = ".".join(rel.parts)
        if rel.name == "__init__" and len(rel.parts) > 1: name = ".".join(rel.parts[:-1])
        out[name] = p
    return out

def imports(name, path):
    "`[(imported module, [names], line)]` for every import of the package in `path`, inner ones too."
    pkg_parts = name.split(".")[:-1] if path.name != "__init__.py" else name.split(".")
    if name == "__init__": pkg_parts = []
    out = []
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom):
            if n.level:
                base = pkg_parts[:len(pkg_parts) - (n.level - 1)] if n.level > 1 else pkg_parts
                mod = ".".join(base + ([n.module] if n.module else []))
            elif (n.module or "").startswith("flashspec"):
                mod = n.module[len("flashspec."):] if n.module != "flashspec" else ""
            else: continue
            names = [a.name for a in n.names]
            if mod in PACKAGES or mod == "":  # `from . import x` / `from .kernel import build`
                for a in names: out.append((f"{mod}.{a}".strip("."), [], n.lineno))
            else: out.append((mod, names, n.lineno))
        elif isinstance(n, ast.Import):
            for a in n.names:
                if a.name.startswith("flashspec."): out.append((a.name[len("flashspec."):], [], n.lineno))
    return out

def graph():
    mods = modules()
    return mods, {m: imports(m, p) for m, p in mods.items()}

def test_every_module_has_a_floor():
    mods, _ = graph()
    missing = sorted(set(mods) - set(FLOOR) - PACKAGES)
    assert not missing, f"modules on no floor of the plan (add them to FLOORS): {missing}"

def test_no_import_climbs_and_no_circle():
    mods, g = graph()
    bad = []
    for m, edges in g.items():
        if m in PACKAGES:
            assert not edges, f"flashspec/{m.replace('.', '/')}/__init__.py imports {edges}"
            continue
        for dep, _, line in edges:
            assert dep in mods, f"{m} (line {line}) imports flashspec.{dep}, which does not exist"
            if FLOOR[dep] >= FLOOR[m]: bad.append(f"{m}:{line} -> {dep}")
    assert not bad, "imports that climb or stay on their floor (a circle's first step):\n" + "\n".join(bad)
    # with every arrow going down, no circle can close; checked directly as well
    seen, stack = set(), []
    def visit(m):
        if m in stack: raise AssertionError(f"import circle: {' -> '.join(stack[stack.index(m):] + [m])}")
        if m in seen: return
        stack.append(m)
        for dep, _, _ in g.get(m, ()): visit(dep)
        stack.pop(); seen.add(m)
    for m in g: visit(m)

def test_no_private_name_crosses_modules():
    _, g = graph()
    crossing = [f"{m} imports {dep}.{n}" for m, edges in g.items() for dep, names, _ in edges
                for n in names if n.startswith("_") and dep != m]
    assert not crossing, f"private names imported from another module: {crossing}"

def test_the_test_can_fail(tmp_path):
    "A climbing import and a circle are caught (on a copy of the graph with one arrow added)."
    mods, g = graph()
    g2 = {m: list(e) for m, e in g.items()}
    g2["util"].append(("cli.main", ["main"], 1))
    climbs = [f"{m}->{d}" for m, es in g2.items() if m not in PACKAGES for d, _, _ in es
              if FLOOR[d] >= FLOOR[m]]
    assert climbs == ["util->cli.main"], climbs
    # the parser reads inner imports too
    p = tmp_path/"m.py"
    p.write_text("def f():\n    from flashspec.cli.main import main\n    from ._x import _y\n")
    assert [(d, n) for d, n, _ in imports("util", p)] == [("cli.main", ["main"]), ("_x", ["_y"])]


def test_methods_inside_their_classes():
    "No function is attached to a class after its definition (`Class.name = f`): methods live inside it."
    found = []
    for m, p in modules().items():
        t = ast.parse(p.read_text())
        classes = {n.name for n in t.body if isinstance(n, ast.ClassDef)}
        for n in t.body:
            if isinstance(n, ast.Assign):
                for tg in n.targets:
                    for x in (tg.elts if isinstance(tg, ast.Tuple) else [tg]):
                        if isinstance(x, ast.Attribute) and getattr(x.value, "id", None) in classes:
                            found.append(f"{m}:{n.lineno} {ast.unparse(x)}")
    assert not found, f"methods attached after the class: {found}"
