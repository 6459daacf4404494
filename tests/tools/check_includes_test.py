#!/usr/bin/env python3
"""The include check (tools/check_includes.py) on a small tree made here: it passes a tree whose
includes follow the declared links and names each planted violation with its file, line and targets."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import check_includes  # noqa: E402


class IncludeCheckTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        self.write("base/base.h", "#pragma once\n#include <string>\n")
        self.write("base/base.cpp", '#include "base/base.h"\n')
        self.write("mid/mid.h", '#pragma once\n#include "base/base.h"\n')
        self.write("mid/mid.cpp", '#include "mid/mid.h"\n')
        self.write("mid/vocabulary.h", "#pragma once\n")  # header-only, mid's folder
        self.write("top/top.cpp", '#include "mid/mid.h"\n#include "base/base.h"\n')
        self.write("side/side.cpp", '#include "side/side.h"\n')
        self.write("side/side.h", "#pragma once\n")
        self.write("tests/helper.h", "#pragma once\n")
        self.write("tests/top_test.cpp", '#include "helper.h"\n#include "top/top.h"\n')
        self.write("top/top.h", "#pragma once\n")
        build = os.path.join(self.root, "build")
        self.graph = {
            "base": self.target("base", ["base/base.cpp"], [], []),
            # mid passes base on (PUBLIC); side is linked privately by top only.
            "mid": self.target("mid", ["mid/mid.cpp"], ["base"], ["base"]),
            "side": self.target("side", ["side/side.cpp"], [], []),
            "top": self.target("top", ["top/top.cpp"], ["mid", "side"], ["mid", "$<LINK_ONLY:side>"]),
            "top_tests": self.target("tests", ["tests/top_test.cpp"], ["top"], []),
            "everything": {"type": "UTILITY", "source_dir": self.root, "binary_dir": build,
                           "sources": [], "links": [], "interface_links": []},
        }

    def tearDown(self):
        self.dir.cleanup()

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)

    def target(self, folder, sources, links, interface_links):
        return {"type": "STATIC_LIBRARY", "source_dir": os.path.join(self.root, folder),
                "binary_dir": os.path.join(self.root, "build", folder),
                "sources": [os.path.join(self.root, s) for s in sources],
                "links": links, "interface_links": interface_links}

    def test_a_tree_that_follows_its_links_passes(self):
        self.assertEqual(check_includes.check(self.graph, self.root), [])

    def test_a_lower_library_including_a_higher_one_is_named(self):
        self.write("base/base.cpp", '#include "base/base.h"\n\n#include "mid/mid.h"\n')
        self.assertEqual(check_includes.check(self.graph, self.root),
                         ["base/base.cpp:3: base includes mid/mid.h of mid, which base does not link"])

    def test_a_header_only_header_belongs_to_its_folder(self):
        self.write("side/side.h", '#pragma once\n#include "mid/vocabulary.h"\n')
        self.assertEqual(check_includes.check(self.graph, self.root),
                         ["side/side.h:2: side includes mid/vocabulary.h of mid, which side does not link"])

    def test_a_private_link_passes_no_headers_on(self):
        # top links side privately, so top's tests may not include side's headers.
        self.write("tests/top_test.cpp", '#include "helper.h"\n#include "side/side.h"\n')
        self.assertEqual(check_includes.check(self.graph, self.root),
                         ["tests/top_test.cpp:2: top_tests includes side/side.h of side, which top_tests does not link"])

    def test_a_public_link_passes_headers_on(self):
        self.write("tests/top_test.cpp", '#include "base/base.h"\n')  # tests -> top -> mid -> base
        self.assertEqual(check_includes.check(self.graph, self.root), [])

    def test_only_tests_may_include_the_tests_helpers(self):
        self.write("top/top.cpp", '#include "mid/mid.h"\n#include "tests/helper.h"\n')
        self.assertEqual(check_includes.check(self.graph, self.root),
                         ["top/top.cpp:2: top includes tests/helper.h of (test support), which top does not link"])

    def test_the_command_fails_naming_the_violation(self):
        self.write("mid/mid.cpp", '#include "mid/mid.h"\n#include "top/top.h"\n')
        import json
        graph_file = os.path.join(self.root, "graph.json")
        with open(graph_file, "w", encoding="utf-8") as f:
            json.dump(self.graph, f)
        import subprocess
        tool = os.path.join(os.path.dirname(check_includes.__file__), "check_includes.py")
        run = subprocess.run([sys.executable, tool, graph_file, self.root], capture_output=True, text=True)
        self.assertEqual(run.returncode, 1)
        self.assertIn("mid/mid.cpp:2: mid includes top/top.h of top, which mid does not link", run.stdout)


if __name__ == "__main__":
    unittest.main()
