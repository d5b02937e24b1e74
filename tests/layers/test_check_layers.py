#!/usr/bin/env python3
"""scripts/check_layers.py on small fake trees: a clean one passes; an upward include, a cycle, an
unknown folder and an unresolvable include each fail naming the file and line."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "check_layers.py")

# A tree the built-in table accepts: includes from src/, beside the file, from a parent folder, of a
# public header and of a generated header that is not on disk.
CLEAN = {
    "include/wpk.h": "",
    "src/base/arena.h": "",
    "src/base/arena.c": '#include "arena.h"\n#include "wpk.h"\n',
    "src/ir/graph.h": '#include "base/arena.h"\n',
    "src/ir/graph.c": '#include "ir/graph.h"\n#include "wpk_runtime.h"\n',
    "src/onnx/import.c": '#include "onnx/onnx.pb-c.h"\n#include "ir/graph.h"\n',
    "src/te/expr.h": "",
    "src/te/algo/conv.c": '#include "../expr.h"\n#include "conv.h"\n',
    "src/te/algo/conv.h": '#include "te/expr.h"\n',
    "src/runtime/rt.h": '#include "base/arena.h"\n',
    "src/runtime/cuda/cuda.c": '#include "runtime/rt.h"\n',
    "src/api/session.c": '#include "runtime/cuda/../rt.h"\n#include "onnx/onnx.pb-c.h"\n'
                         '/* #include "nowhere/x.h" */\n',
}


def run(root, *args):
    p = subprocess.run([sys.executable, SCRIPT, "--root", root] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    return p.returncode, p.stdout


class CheckLayers(unittest.TestCase):
    def tree(self, files, extra=None):
        d = tempfile.mkdtemp(prefix="wpk_layers_")
        self.addCleanup(shutil.rmtree, d)
        merged = dict(files)
        merged.update(extra or {})
        for rel, text in merged.items():
            path = os.path.join(d, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        return d

    def test_clean_tree_passes(self):
        code, out = run(self.tree(CLEAN))
        self.assertEqual(code, 0, out)
        self.assertIn("the layering holds", out)
        self.assertEqual(len(out.strip().splitlines()), 1, out)

    def test_upward_include_names_file_and_line(self):
        d = self.tree(CLEAN, {"src/runtime/x.c": '#include "base/arena.h"\n\n#include "ir/graph.h"\n'})
        code, out = run(d)
        self.assertEqual(code, 1, out)
        self.assertIn("src/runtime/x.c:3: runtime includes ir/graph.h (runtime may include: base)", out)

    def test_subfolder_is_its_own_layer(self):
        d = self.tree(CLEAN, {"src/runtime/cpu/cpu.h": "",
                              "src/runtime/cuda/y.c": '#include "runtime/cpu/cpu.h"\n'})
        code, out = run(d)
        self.assertEqual(code, 1, out)
        self.assertIn("src/runtime/cuda/y.c:1: runtime/cuda includes runtime/cpu/cpu.h", out)

    def test_relative_include_resolves_to_its_folder(self):
        d = self.tree(CLEAN, {"src/runtime/cuda/z.c": '#include "../../ir/graph.h"\n'})
        code, out = run(d)
        self.assertEqual(code, 1, out)
        self.assertIn("src/runtime/cuda/z.c:1: runtime/cuda includes ../../ir/graph.h", out)

    def test_cycle_the_table_allows_is_reported(self):
        d = self.tree({"src/a/a.h": '#include "b/b.h"\n',
                       "src/b/b.h": "",
                       "src/b/b.c": '#include "b.h"\n\n#include "a/a.h"\n'})
        table = os.path.join(d, "table.json")
        with open(table, "w") as f:
            json.dump({"a": ["b"], "b": ["a"]}, f)
        code, out = run(d, "--table", table)
        self.assertEqual(code, 1, out)
        self.assertIn("cycle: a -> b -> a", out)
        self.assertIn("src/a/a.h:1: a includes b/b.h", out)
        self.assertIn("src/b/b.c:3: b includes a/a.h", out)
        self.assertNotIn("may include", out)

    def test_unknown_folder_asks_for_a_table_entry(self):
        d = self.tree(CLEAN, {"src/mystery/m.c": '#include "base/arena.h"\n'})
        code, out = run(d)
        self.assertEqual(code, 1, out)
        self.assertIn("src/mystery: folder not in the layer table", out)
        self.assertIn('add "mystery" to LAYERS', out)

    def test_generated_header_outside_every_layer_fails(self):
        d = self.tree(CLEAN, {"src/api/gen.c": '#include "newgen/out.h"\n'})
        code, out = run(d)
        self.assertEqual(code, 1, out)
        self.assertIn("src/api/gen.c:1: api includes newgen/out.h, which is not a file", out)

    def test_unresolvable_include_fails(self):
        d = self.tree(CLEAN, {"src/ir/bad.c": '#include "missing.h"\n'})
        code, out = run(d)
        self.assertEqual(code, 1, out)
        self.assertIn("src/ir/bad.c:1: ir includes missing.h, which is not a file in src/ or include/", out)

    def test_graph_lists_folders_with_counts(self):
        code, out = run(self.tree(CLEAN), "--graph")
        self.assertEqual(code, 0, out)
        self.assertIn("api -> onnx (1), runtime (1)", out)
        self.assertIn("base -> (nothing)", out)
        self.assertIn("te/algo -> te (2)", out)

    def test_table_naming_no_layer_is_refused(self):
        d = self.tree(CLEAN)
        table = os.path.join(d, "table.json")
        with open(table, "w") as f:
            json.dump({"base": [], "ir": ["bsae"]}, f)
        code, out = run(d, "--table", table)
        self.assertEqual(code, 2, out)
        self.assertIn("ir may include 'bsae', which is not a layer", out)


if __name__ == "__main__":
    unittest.main(verbosity=1)
