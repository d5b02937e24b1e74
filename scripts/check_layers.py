#!/usr/bin/env python3
"""Keeps src/'s folders depending only downward: every `#include "..."` in src/**/*.c and *.h must
land in a layer its own layer may include (LAYERS below), and the folder-level include graph must
have no cycle. Run by ctest (check_layers); `--graph` prints the graph for the docs.

Exit 0 with a one-line summary when the layering holds, 1 with one line per violation otherwise,
2 on a bad invocation or a bad table."""

import argparse
import json
import os
import re
import sys
from collections import defaultdict, deque

# ---- the layering: edit here ----
# Each layer is a folder under src/. A file belongs to the longest folder prefix of its path that this
# table names (src/runtime/cuda/x.c -> "runtime/cuda", src/tune/templates/x.c -> "tune"). A layer may
# always include itself; the list says which other layers it may include. Layers not on disk are fine.
BASE = ["base"]
GRAPH = ["ir", "ops", "onnx", "passes"]
TE = ["te", "te/algo"]
CODEGEN = ["codegen", "codegen/c", "codegen/cuda"]
RUNTIME = ["runtime", "runtime/cpu", "runtime/cuda"]
# kernels/vendor is part of the kernels layer: the registry lists the vendor providers, which
# implement the provider interface the layer defines
KERNELS = ["kernels"]
BELOW_TUNE = BASE + GRAPH + TE + ["loop", "isa"] + CODEGEN + RUNTIME + KERNELS

LAYERS = {
    "base": [],
    "ir": ["base"],
    "ops": ["base", "ir"],
    "onnx": ["base", "ir"],
    "passes": ["base", "ir", "ops"],
    "te": ["base"],
    "te/algo": ["base", "te"],
    "loop": ["base", "te"],
    "isa": ["base", "te", "loop"],
    "codegen": ["base", "te", "loop"],
    "codegen/c": ["base", "te", "loop", "isa", "codegen"],
    "codegen/cuda": ["base", "te", "loop", "isa", "codegen"],
    "runtime": ["base"],
    "runtime/cpu": ["base", "runtime"],
    "runtime/cuda": ["base", "runtime"],
    "kernels": ["base", "ir", "ops", "passes"] + TE + ["loop", "isa"] + CODEGEN + RUNTIME + KERNELS,
    "tune": BELOW_TUNE,
    "compile": BELOW_TUNE + ["tune"],
    "api": BELOW_TUNE + ["tune", "compile"],
    # the inference server: the public API (include/wpk.h) and base's helpers
    "serve": ["base", "api"],
}

# Headers made at build time: where they are not on disk, an include path starting with a layer's
# folder (onnx/onnx.pb-c.h) belongs to that layer. Public headers may be included from anywhere.
PUBLIC_HEADERS = {"wpk.h", "wpk_runtime.h"}
SOURCE_SUFFIXES = (".c", ".h")
# ---- end of the layering ----

INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
BLOCK_COMMENT_RE = re.compile(r"/\*.*?\*/", re.S)


def repo_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def check_table(table):
    """Returns the table's own mistakes: a dependency naming no layer."""
    errors = []
    for layer, deps in table.items():
        for dep in deps:
            if dep not in table:
                errors.append("table: %s may include %r, which is not a layer in the table" % (layer, dep))
    return errors


def layer_of(rel_dir, table):
    """The layer of a folder given relative to src/ ('' for src/ itself): its longest prefix the table
    names, else its first component (which may be unknown to the table)."""
    parts = rel_dir.split("/") if rel_dir else []
    for n in range(len(parts), 0, -1):
        prefix = "/".join(parts[:n])
        if prefix in table:
            return prefix
    return parts[0] if parts else ""


def rel_folder(path, src):
    """The folder holding `path`, relative to src/, with '/' separators ('' for src/ itself)."""
    rel = os.path.relpath(os.path.dirname(path), src).replace(os.sep, "/")
    return "" if rel == "." else rel


def strip_comments(text):
    """Blanks block comments, keeping their newlines so line numbers stay right."""
    return BLOCK_COMMENT_RE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def source_files(src):
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(SOURCE_SUFFIXES):
                yield os.path.join(dirpath, name)


def resolve(path, inc, root, src, table):
    """Where `#include "inc"` in `path` lands, as (kind, value): ("layer", name), ("public", None) or
    ("error", why). Looks beside the including file first, as the compiler does, then in src/, then
    in include/."""
    include_dir = os.path.join(root, "include")
    for base in (os.path.dirname(path), src, include_dir):
        target = os.path.normpath(os.path.join(base, inc))
        if not os.path.isfile(target):
            continue
        if os.path.commonpath([target, include_dir]) == include_dir:
            return ("public", None)
        if os.path.commonpath([target, src]) == src:
            layer = layer_of(rel_folder(target, src), table)
            return ("layer", layer) if layer else ("error", "lies directly in src/, in no layer")
        return ("error", "lands outside src/ and include/")
    if os.path.basename(inc) in PUBLIC_HEADERS and "/" not in inc:
        return ("public", None)
    # Not on disk: a generated header, named by its layer's folder.
    norm = os.path.normpath(inc).replace(os.sep, "/")
    folder = os.path.dirname(norm)
    if folder and not folder.startswith(".."):
        first = folder.split("/")[0]
        if first in table or os.path.isdir(os.path.join(src, first)):
            return ("layer", layer_of(folder, table))
    return ("error", "is not a file in src/ or include/ (a generated header must be named by its layer's "
                     "folder, as onnx/onnx.pb-c.h)")


def scan(root, table):
    """Reads every include under root/src. Returns (edges, errors, folders): edges maps (from, to) to
    the list of (file, line, include) that make it; errors are messages; folders are the layers seen."""
    src = os.path.join(root, "src")
    edges = defaultdict(list)
    errors = []
    folders = set()
    unknown = {}
    for path in source_files(src):
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        layer = layer_of(rel_folder(path, src), table)
        if not layer:
            errors.append("%s: a file directly in src/ belongs to no layer; move it into a layer's folder"
                          % rel)
            continue
        folders.add(layer)
        if layer not in table:
            unknown.setdefault(layer, rel)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = strip_comments(f.read())
        for m in INCLUDE_RE.finditer(text):
            inc = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            kind, value = resolve(path, inc, root, src, table)
            if kind == "public":
                continue
            if kind == "error":
                errors.append("%s:%d: %s includes %s, which %s" % (rel, line, layer, inc, value))
                continue
            if value not in table:
                unknown.setdefault(value, "%s:%d" % (rel, line))
            if value != layer:
                edges[(layer, value)].append((rel, line, inc))
    for folder in sorted(unknown):
        errors.append("src/%s: folder not in the layer table (first seen at %s); add \"%s\" to LAYERS in "
                      "scripts/check_layers.py with the layers it may include"
                      % (folder, unknown[folder], folder))
    return edges, errors, folders


def table_violations(edges, table):
    out = []
    for (a, b), sites in edges.items():
        if a not in table or b not in table or b in table[a]:
            continue
        allowed = ", ".join(table[a]) if table[a] else "nothing outside itself"
        for rel, line, inc in sites:
            out.append((rel, line, "%s:%d: %s includes %s (%s may include: %s)" % (rel, line, a, inc, a, allowed)))
    return [msg for _, _, msg in sorted(out)]


def strongly_connected(nodes, succ):
    """Tarjan's algorithm, iteratively; returns the components of more than one folder."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(succ[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def shortest_path(succ, start, goal, allowed):
    """Breadth-first path start .. goal inside `allowed`, as a list of folders."""
    prev = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        if v == goal:
            path = []
            while v is not None:
                path.append(v)
                v = prev[v]
            return path[::-1]
        for w in sorted(succ[v]):
            if w in allowed and w not in prev:
                prev[w] = v
                queue.append(w)
    return None


def cycles(edges):
    """One shortest cycle through each edge that lies on a cycle, without repeats: fixing one cycle
    of a tangle then does not hide the next."""
    succ = defaultdict(set)
    nodes = set()
    for a, b in edges:
        succ[a].add(b)
        nodes.update((a, b))
    found = []
    seen = set()
    for comp in strongly_connected(nodes, succ):
        members = set(comp)
        for a in comp:
            for b in sorted(succ[a] & members):
                back = shortest_path(succ, b, a, members)
                cyc = [a] + back
                ring = cyc[:-1]
                k = ring.index(min(ring))
                key = tuple(ring[k:] + ring[:k])
                if key not in seen:
                    seen.add(key)
                    found.append(list(key) + [key[0]])
    return sorted(found, key=lambda c: (len(c), c))


def cycle_messages(edges):
    out = []
    for cyc in cycles(edges):
        out.append("cycle: %s" % " -> ".join(cyc))
        for a, b in zip(cyc, cyc[1:]):
            rel, line, inc = edges[(a, b)][0]
            more = len(edges[(a, b)]) - 1
            out.append("  %s:%d: %s includes %s%s"
                       % (rel, line, a, inc, " (and %d more)" % more if more else ""))
    return out


def print_graph(edges, folders):
    targets = defaultdict(list)
    for (a, b), sites in edges.items():
        targets[a].append((b, len(sites)))
    for folder in sorted(folders | {a for a, _ in edges} | {b for _, b in edges}):
        deps = ", ".join("%s (%d)" % (b, n) for b, n in sorted(targets[folder]))
        print("%s -> %s" % (folder, deps or "(nothing)"))


def load_table(path):
    with open(path, encoding="utf-8") as f:
        table = json.load(f)
    if not isinstance(table, dict) or not all(isinstance(v, list) for v in table.values()):
        raise ValueError("%s: want a JSON object mapping each layer to a list of layers" % path)
    return table


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=repo_root(), help="the tree to check (default: this repository)")
    ap.add_argument("--graph", action="store_true",
                    help="print the folder graph (folder -> folders it includes, with counts) and exit")
    ap.add_argument("--table", metavar="JSON",
                    help="use this table (a JSON object: layer -> layers it may include) instead of "
                         "LAYERS; for tests and for trying a change")
    args = ap.parse_args(argv)

    try:
        table = load_table(args.table) if args.table else LAYERS
    except (OSError, ValueError) as e:
        print("check_layers: %s" % e, file=sys.stderr)
        return 2
    bad_table = check_table(table)
    if bad_table:
        for msg in bad_table:
            print("check_layers: %s" % msg, file=sys.stderr)
        return 2
    root = os.path.abspath(args.root)
    if not os.path.isdir(os.path.join(root, "src")):
        print("check_layers: %s has no src/ folder" % root, file=sys.stderr)
        return 2

    edges, errors, folders = scan(root, table)
    if args.graph:
        print_graph(edges, folders)
        return 0
    upward = table_violations(edges, table)
    loops = cycle_messages(edges)
    for msg in errors + upward + loops:
        print(msg)
    n_cycles = sum(1 for m in loops if m.startswith("cycle: "))
    n_includes = sum(len(s) for s in edges.values())
    if errors or upward or loops:
        print("check_layers: FAILED: %d unknown or unresolved, %d upward includes, %d folder cycles "
              "(%d folders, %d edges)" % (len(errors), len(upward), n_cycles, len(folders), len(edges)))
        return 1
    print("check_layers: the layering holds: %d folders, %d edges (%d cross-folder includes)"
          % (len(folders), len(edges), n_includes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
