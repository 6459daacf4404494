#!/usr/bin/env python3
"""Checks every #include of the repository's own headers against the links CMake declares.

Every library exports the repository root as its include path, so a source can include any header
of any library and the compiler says nothing; what keeps the dependency graph one-way is that a
file includes only headers of its own target or of targets it links (directly, or through what a
linked target passes on with PUBLIC or INTERFACE). This script enforces that rule.

  check_includes.py GRAPH.json SOURCE_DIR

GRAPH.json is written by CMake at configure time (cmake/TargetGraph.cmake). A header belongs to the
target that compiles the .cpp/.cu beside it with the same name; a header without one belongs to the
target whose sources are in its folder (when exactly one target's are). A file is checked as part of
the target that owns it. Exit status 1 and one line per violation:
  FILE:LINE: TARGET includes HEADER of OWNER, which TARGET does not link
"""

import json
import os
import re
import sys
from collections import defaultdict

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
SOURCE_SUFFIXES = (".cpp", ".cc", ".cu")
HEADER_SUFFIXES = (".h", ".hpp", ".cuh")
# Header-only helpers under tests/, which any test target may include.
TEST_SUPPORT = "(test support)"


def usage_closure(graph, target):
    """The targets whose headers `target` may include: itself, what it links, and what those pass on."""
    allowed = {target}
    stack = [l for l in graph[target]["links"] + graph[target]["interface_links"] if l in graph]
    while stack:
        dep = stack.pop()
        if dep in allowed:
            continue
        allowed.add(dep)
        # A dependency's private links ($<LINK_ONLY:...>) pass on no headers; its interface ones do.
        stack.extend(l for l in graph[dep]["interface_links"] if l in graph)
    return allowed


def owners(graph):
    """Maps each repository file to the targets that own it: those that list it or compile the
    .cpp/.cu of the same name beside it (a helper compiled into several test suites has several)."""
    owner = defaultdict(set)
    folder_targets = defaultdict(set)
    for name, t in graph.items():
        for s in t["sources"]:
            s = os.path.normpath(s)
            if not s.endswith(SOURCE_SUFFIXES + HEADER_SUFFIXES):
                continue
            owner[s].add(name)
            folder_targets[os.path.dirname(s)].add(name)
            stem = os.path.splitext(s)[0]
            for suffix in HEADER_SUFFIXES:
                owner[stem + suffix].add(name)
    return owner, folder_targets


def header_owners(path, owner, folder_targets, source_dir):
    """The targets `path` belongs to; for a header of no target's, that of its folder's one target.
    A header-only helper of the tests (tests/...) belongs to every test target (TEST_SUPPORT)."""
    if path in owner:
        return owner[path]
    if path.startswith(os.path.join(source_dir, "tests") + os.sep):
        return {TEST_SUPPORT}
    candidates = folder_targets.get(os.path.dirname(path), set())
    return candidates if len(candidates) == 1 else set()


def resolve(include, including_file, roots):
    for base in [os.path.dirname(including_file)] + roots:
        candidate = os.path.normpath(os.path.join(base, include))
        if os.path.isfile(candidate):
            return candidate
    return None


def read_lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def check(graph, source_dir):
    """Returns the violations, one line each."""
    source_dir = os.path.normpath(source_dir)
    owner, folder_targets = owners(graph)
    roots = [source_dir, os.path.join(source_dir, "tests")]
    roots += sorted({os.path.normpath(t["binary_dir"]) for t in graph.values()})
    tests_dir = os.path.join(source_dir, "tests") + os.sep
    closures = {}

    def may_include(target):
        if target not in closures:
            closures[target] = usage_closure(graph, target)
            if (os.path.normpath(graph[target]["source_dir"]) + os.sep).startswith(tests_dir):
                closures[target].add(TEST_SUPPORT)
        return closures[target]

    # The build tree: what is generated there is checked through what generates it.
    build_dir = os.path.commonpath([os.path.normpath(t["binary_dir"]) for t in graph.values()])
    headers_in_folders = {
        os.path.join(d, f) for d in folder_targets if os.path.isdir(d) for f in os.listdir(d)
        if f.endswith(HEADER_SUFFIXES)}
    violations = []
    for path in sorted(set(owner) | headers_in_folders):
        if (not path.startswith(source_dir + os.sep) or path.startswith(build_dir + os.sep)
                or not os.path.isfile(path)):
            continue
        targets = header_owners(path, owner, folder_targets, source_dir) - {TEST_SUPPORT}
        for number, line in enumerate(read_lines(path), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            header = resolve(m.group(1), path, roots)
            if header is None:
                continue  # a system header in quotes
            of = header_owners(header, owner, folder_targets, source_dir)
            if not of:
                continue
            for target in sorted(targets):
                if not of & may_include(target):
                    violations.append(f"{os.path.relpath(path, source_dir)}:{number}: {target} includes "
                                      f"{m.group(1)} of {', '.join(sorted(of))}, which {target} does not link")
    return violations


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: check_includes.py GRAPH.json SOURCE_DIR", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        graph = json.load(f)
    violations = check(graph, argv[2])
    for v in violations:
        print(v)
    if violations:
        print(f"{len(violations)} includes of headers of targets that are not linked", file=sys.stderr)
        return 1
    print(f"every include of the repository's headers follows the declared links ({len(graph)} targets)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
