#!/usr/bin/env python3
"""reduce.py: delta-reduces a generated program that mismatches, keeping the mismatch.

    python3 tests/genprog/reduce.py --runner build/genprog-run FILE.kern -o OUT.kern
                                    [--runner-args "..."] [--max-tests N]

The mismatch to keep is the first one genprog-run reports for FILE: its entry
and what was compared ("k3: cpu-nospec against cpu", "sse:cpu ... k3").  A
candidate is kept when genprog-run still reports a mismatch of that entry and
comparison (an invalid program, one that no longer compiles, or one whose
evaluator run found a race or an index out of range, is not).  The passes, to
a fixed point:
  1. remove units: a function (with its directive), a statement line, or a
     block statement with its body (ddmin: halves, quarters, ... single units);
  2. unwrap a block statement: keep its body, drop the if/for/while around it;
  3. simplify expressions: a parenthesised (A op B) becomes A or B, a
     conditional (c ? A : B) becomes A or B, either becomes the literal 0, and a
     literal T(v) becomes T(0) or T(1).
The first line (gen.py's seed comment) and the directives are kept: the
runner draws the inputs from them, so the reduced program sees the same ones.
"""
import argparse
import os
import re
import signal
import time
import subprocess
import sys


class Oracle:
    def __init__(self, runner, extra, key, max_tests):
        self.runner, self.extra, self.key = runner, extra, key
        self.tests, self.max_tests = 0, max_tests
        self.cache = {}
        self.timeout = 600

    def run(self, text, path, timeout=None):
        """The runner's output on text; "" when it runs past the timeout (a
        candidate whose loop no longer ends), killed with its children."""
        with open(path, "w") as f:
            f.write(text)
        p = subprocess.Popen([self.runner] + self.extra + [path], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout or self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return ""
        return out

    def interesting(self, text, path):
        if text in self.cache:
            return self.cache[text]
        if self.tests >= self.max_tests:
            return False
        self.tests += 1
        out = self.run(text, path)
        ok = any(mismatch_key(l) == self.key for l in mismatch_lines(out))
        self.cache[text] = ok
        return ok


def mismatch_lines(out):
    """The lines that name one mismatch: "  entry: what: ..." and children's lines."""
    lines, inside = [], False
    for l in out.splitlines():
        if l.startswith("mismatch "):
            if ") differs from cpu: " in l:
                lines.append(l)
            inside = True
            continue
        if inside and l.startswith("  "):
            lines.append(l)
        else:
            inside = False
    return lines


def mismatch_key(line):
    m = re.search(r": (\w+):(\S+) \(KJIT_CPU_FEATURES=(\S+)\) differs from cpu: (\S+)", line)
    if m:
        return (m.group(4), m.group(1) + ":" + m.group(2))
    parts = line.strip().split(": ")
    if len(parts) >= 2:
        return (parts[0], parts[1])
    return None


# ------------------------------------------------------------------ units

def units(lines):
    """Removable units: (first, last) line ranges, functions first."""
    out, stack = [], []
    fn_start = None
    for i, l in enumerate(lines):
        s = l.strip()
        if i == 0 or not s:
            continue
        if s.startswith("//!") or (s.startswith("@") and fn_start is None):
            if fn_start is None:
                fn_start = i
            continue
        if s.startswith("fn ") and s.endswith("{"):
            stack.append((fn_start if fn_start is not None else i, "fn"))
            fn_start = None
            continue
        if s.endswith("{") and not s.startswith("}"):
            stack.append((i, "block"))
            continue
        if s.startswith("}") and s.endswith("{"):  # } else {
            continue
        if s == "}":
            if stack:
                start, kind = stack.pop()
                out.append((start, i, kind))
            continue
        if stack:
            out.append((i, i, "stmt"))
    fns = [u for u in out if u[2] == "fn"]
    blocks = [u for u in out if u[2] == "block"]
    stmts = [u for u in out if u[2] == "stmt"]
    return fns, blocks, stmts


def without(lines, ranges):
    drop = set()
    for a, b, _ in ranges:
        drop.update(range(a, b + 1))
    return [l for i, l in enumerate(lines) if i not in drop]


def ddmin_remove(oracle, lines, path, pick):
    """Removes as many of pick(lines)'s units as it can, chunk by chunk."""
    changed = False
    n = 2
    while True:
        us = pick(lines)
        if not us:
            return lines, changed
        n = min(n, len(us))
        size = max(1, len(us) // n)
        progress = False
        for start in range(0, len(us), size):
            chunk = us[start:start + size]
            cand = without(lines, chunk)
            if oracle.interesting("\n".join(cand) + "\n", path):
                lines = cand
                changed = progress = True
                break
        if progress:
            continue
        if size == 1:
            return lines, changed
        n *= 2


def unwrap_blocks(oracle, lines, path):
    changed = True
    any_change = False
    while changed:
        changed = False
        _, blocks, _ = units(lines)
        for a, b, _ in blocks:
            s = lines[a].strip()
            if s.startswith("fn ") or s.startswith("@"):
                continue
            body = lines[a + 1:b]
            # an if with an else: keep one side
            sides = [body]
            for k, l in enumerate(body):
                if l.strip() == "} else {":
                    sides = [body[:k], body[k + 1:]]
                    break
            for side in sides:
                cand = lines[:a] + side + lines[b + 1:]
                if oracle.interesting("\n".join(cand) + "\n", path):
                    lines = cand
                    changed = any_change = True
                    break
            if changed:
                break
    return lines, any_change


# ------------------------------------------------------------------ expressions

def groups(line):
    """(start, end) of every balanced parenthesised group of the line."""
    out, stack = [], []
    for i, c in enumerate(line):
        if c == "(":
            stack.append(i)
        elif c == ")" and stack:
            out.append((stack.pop(), i))
    return out


def split_top(text):
    """The operands of 'A op B' (or 'c ? A : B') at the top level of text."""
    depth, parts, cur = 0, [], ""
    tokens = re.split(r"(\(|\)|\s+)", text)
    for t in tokens:
        if t == "(":
            depth += 1
        elif t == ")":
            depth -= 1
        if depth == 0 and t.strip() in ("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "&&", "||",
                                         "<", "<=", ">", ">=", "==", "!=", "?", ":", "**"):
            parts.append(cur.strip())
            cur = ""
            continue
        cur += t
    parts.append(cur.strip())
    return [p for p in parts if p]


def simplify_exprs(oracle, lines, path):
    any_change = False
    for i in range(len(lines)):
        if lines[i].lstrip().startswith("//") or lines[i].lstrip().startswith("fn "):
            continue
        progress = True
        while progress:
            progress = False
            line = lines[i]
            cands = []
            for a, b in sorted(groups(line), key=lambda g: g[0] - g[1]):
                inner = line[a + 1:b]
                if a > 0 and (line[a - 1].isalnum() or line[a - 1] == "_"):
                    # a call or a conversion: T(v) literals become 0 and 1
                    m = re.match(r"^-?\d+(\.\d*)?$", inner.strip())
                    if m and inner.strip() not in ("0", "1", "0.0", "1.0"):
                        for v in ("0", "1"):
                            cands.append(line[:a + 1] + v + line[b:])
                    continue
                for part in split_top(inner):
                    if part != inner:
                        cands.append(line[:a] + "(" + part + ")" + line[b + 1:])
                if inner.strip() not in ("0", "1"):
                    cands.append(line[:a] + "(0)" + line[b + 1:])  # a literal takes any number type
            for c in cands:
                cand = lines[:i] + [c] + lines[i + 1:]
                if oracle.interesting("\n".join(cand) + "\n", path):
                    lines = cand
                    progress = any_change = True
                    break
    return lines, any_change


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--runner", default="build/genprog-run")
    ap.add_argument("--runner-args", default="", help="extra genprog-run arguments")
    ap.add_argument("--max-tests", type=int, default=3000)
    a = ap.parse_args()
    text = open(a.file).read()
    extra = a.runner_args.split()
    work = a.out + ".work.kern"
    probe = Oracle(a.runner, extra, None, 1)
    start = time.time()
    out = probe.run(text, work)
    # a candidate may loop for ever (a removed increment): ten times the
    # original's time, at least 20 s, is where it stops counting
    took = time.time() - start
    keys = [mismatch_key(l) for l in mismatch_lines(out)]
    keys = [k for k in keys if k]
    if not keys:
        print("reduce.py: %s does not mismatch:\n%s" % (a.file, out), file=sys.stderr)
        return 1
    key = keys[0]
    # the in-process mismatch needs only its two modes; a child's, the children
    oracle = Oracle(a.runner, extra, key, a.max_tests)
    oracle.timeout = max(20.0, 10 * took)
    lines = text.rstrip("\n").split("\n")
    print("reduce.py: keeping %s (%d lines)" % (" / ".join(key), len(lines)), file=sys.stderr)
    changed = True
    while changed and oracle.tests < a.max_tests:
        changed = False
        for pick in (lambda ls: units(ls)[0], lambda ls: units(ls)[1], lambda ls: units(ls)[2]):
            lines, c = ddmin_remove(oracle, lines, work, pick)
            changed |= c
        lines, c = unwrap_blocks(oracle, lines, work)
        changed |= c
        lines, c = simplify_exprs(oracle, lines, work)
        changed |= c
    result = re.sub(r"\n{3,}", "\n\n", "\n".join(lines) + "\n")
    # the reduced program, checked once more
    final = probe.run(result, work)
    with open(a.out, "w") as f:
        f.write(result)
    os.remove(work)
    print("reduce.py: %s: %d lines, %d tests; the mismatch:\n%s" %
          (a.out, len(lines), oracle.tests, "\n".join(mismatch_lines(final))), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
