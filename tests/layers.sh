#!/usr/bin/env bash
# The layers rule (docs/architecture.md): a folder includes only from itself and
# the folders below it, in this order:
#
#   compiler/          the front end and the IR passes
#   compiler/backend/  LLVM lowering and emission, the ABI of compiled code
#   runtime/           libkjit, behind kjit.h
#   compiler/cli/      the kjit command, which sees only kjit.h and kjit_tools.h
#
# and only compiler/backend/ includes LLVM.  Every quoted #include of every
# source and header is resolved from the including file's folder; one that
# crosses the rule is printed with its line, and the check fails.
#
# Then, inside the layers, no circle of files (../shared/STYLE.md, rule 11):
# from the object files under $BUILD/obj (nm's defined and undefined symbols)
# it draws which file uses which other file's functions and data, and prints
# every strongly connected set of more than one file.  Each must be a line of
# tests/layers_cycles.allow, and each line there must still be one: the list
# only shrinks, and the check passes with no line once the circles are gone.
#
# Last, docs/architecture.md's "Every source, by layer" must name every source
# of compiler/, compiler/backend/ and runtime/ in an order the same graph
# keeps: a file uses only the files named before it in its folder's list.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."

layer_of() {
    case "$1" in
    compiler/cli/*) echo 3 ;;
    runtime/*) echo 2 ;;
    compiler/backend/*) echo 1 ;;
    compiler/*) echo 0 ;;
    *) echo -1 ;;
    esac
}

bad=0 checked=0
for file in compiler/*.[ch] compiler/backend/*.[ch] runtime/*.[ch] compiler/cli/*.[ch]; do
    dir=$(dirname "$file")
    from=$(layer_of "$file")
    while IFS=: read -r line text; do
        checked=$((checked + 1))
        name=$(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' <<<"$text")
        if [ -z "$name" ]; then
            if [[ "$text" == *"<llvm-c/"* && "$from" != 1 ]]; then
                echo "$file:$line: LLVM outside compiler/backend/: $text"
                bad=$((bad + 1))
            fi
            continue
        fi
        target=$(realpath -m --relative-to=. "$dir/$name")
        if [ ! -e "$target" ]; then
            echo "$file:$line: includes $name, which is not at $target"
            bad=$((bad + 1))
            continue
        fi
        to=$(layer_of "$target")
        if [ "$to" -lt 0 ] || [ "$to" -gt "$from" ]; then
            echo "$file:$line: includes $target, a layer above it"
            bad=$((bad + 1))
        elif [ "$from" = 3 ] && [ "$to" != 3 ] &&
             [ "$target" != runtime/kjit.h ] && [ "$target" != runtime/kjit_tools.h ]; then
            echo "$file:$line: the command line includes $target (only kjit.h and kjit_tools.h)"
            bad=$((bad + 1))
        fi
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include' "$file")
done
echo "layers: $((checked - bad)) passed, $bad failed"

cycles_bad=0
if ! ls "$BUILD"/obj/compiler/*.o >/dev/null 2>&1; then
    echo "layers: no object files under $BUILD/obj; build first (make)"
    cycles_bad=1
else
    python3 - "$BUILD" tests/layers_cycles.allow <<'PY' || cycles_bad=1
import collections, glob, os, subprocess, sys

build, allow_path = sys.argv[1], sys.argv[2]
def source(obj):
    return obj[len(build) + len("/obj/"):-len(".o")] + ".c"

# Objects of sources that are gone (a file renamed since the last build) are left out.
objects = sorted(o for o in glob.glob(f"{build}/obj/compiler/*.o") + glob.glob(f"{build}/obj/compiler/backend/*.o")
                 + glob.glob(f"{build}/obj/runtime/*.o") if os.path.exists(source(o)))

def symbols(flags, obj):
    out = subprocess.run(["nm", *flags, obj], capture_output=True, text=True, check=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]

defined_in, undefined = {}, {}
for obj in objects:
    for name in symbols(["-g", "--defined-only"], obj):
        defined_in[name] = source(obj)
    undefined[source(obj)] = symbols(["-u"], obj)

# uses[a][b]: the symbols of b that a uses
uses = collections.defaultdict(lambda: collections.defaultdict(list))
for user, names in undefined.items():
    for name in names:
        owner = defined_in.get(name)
        if owner and owner != user:
            uses[user][owner].append(name)

# Tarjan's strongly connected components, iteratively.
index, low, on_stack, stack, components, counter = {}, {}, set(), [], [], 0
for root in sorted(undefined):
    if root in index:
        continue
    work = [(root, iter(sorted(uses[root])))]
    index[root] = low[root] = counter; counter += 1
    stack.append(root); on_stack.add(root)
    while work:
        node, edges = work[-1]
        for nxt in edges:
            if nxt not in index:
                index[nxt] = low[nxt] = counter; counter += 1
                stack.append(nxt); on_stack.add(nxt)
                work.append((nxt, iter(sorted(uses[nxt]))))
                break
            if nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        else:
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop(); on_stack.discard(member); component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))

found = {" ".join(c) for c in components}
allowed = set()
with open(allow_path) as f:
    for line in f:
        line = line.split("#", 1)[0].strip()
        if line:
            allowed.add(" ".join(sorted(line.split())))

edges = sum(len(v) for v in uses.values())
print(f"layers: {len(undefined)} object files, {edges} uses between files, "
      f"{len(components)} circle(s) of files")
for c in sorted(components, key=len, reverse=True):
    members = set(c)
    state = "allowed" if " ".join(c) in allowed else "NEW"
    print(f"  circle of {len(c)} files ({state}):")
    for a in c:
        for b in sorted(uses[a]):
            if b in members:
                names = uses[a][b]
                more = f" and {len(names) - 3} more" if len(names) > 3 else ""
                print(f"    {a} -> {b}: {', '.join(sorted(names)[:3])}{more}")
new = found - allowed
gone = allowed - found
for line in sorted(gone):
    print(f"layers: {allow_path} lists a circle that is no longer one; remove or shrink it: {line}")
if new:
    print(f"layers: {len(new)} circle(s) of files not in {allow_path}: each file must call only down")
sys.exit(1 if new or gone else 0)
PY
fi

order_bad=0
if [ "$cycles_bad" = 0 ]; then
    python3 - "$BUILD" docs/architecture.md <<'PY' || order_bad=1
import glob, os, re, subprocess, sys

build, doc_path = sys.argv[1], sys.argv[2]
doc = open(doc_path).read()
section = doc[doc.index("## Every source, by layer"):doc.index("## The pass list")]
place = {}  # source -> (its folder's list, its place there)
for item in re.split(r"\n- ", section):
    folder = re.match(r"`(compiler/|compiler/backend/|runtime/|compiler/cli/)`", item)
    if not folder:
        continue
    for i, name in enumerate(re.findall(r"`([A-Za-z0-9_./]+\.c)`", item)):
        path = name if name.startswith("build/") else folder.group(1) + os.path.basename(name)
        place[path] = (folder.group(1), i)

def source(obj):
    return obj[len(build) + len("/obj/"):-len(".o")] + ".c"

objects = sorted(o for o in glob.glob(f"{build}/obj/compiler/*.o") + glob.glob(f"{build}/obj/compiler/backend/*.o")
                 + glob.glob(f"{build}/obj/runtime/*.o") if os.path.exists(source(o)))

def symbols(flags, obj):
    out = subprocess.run(["nm", *flags, obj], capture_output=True, text=True, check=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]

defined_in, undefined = {}, {}
for obj in objects:
    for name in symbols(["-g", "--defined-only"], obj):
        defined_in[name] = source(obj)
    undefined[source(obj)] = symbols(["-u"], obj)

problems = set()
for user in sorted(undefined):
    if user not in place:
        problems.add(f"{doc_path} does not name {user} in its list of sources")
        continue
    for name in undefined[user]:
        owner = defined_in.get(name)
        if owner and owner != user and owner in place and place[owner][0] == place[user][0] \
                and place[owner][1] > place[user][1]:
            problems.add(f"{user} uses {owner} ({name}), which {doc_path} lists after it")
for line in sorted(problems):
    print(f"layers: {line}")
print(f"layers: {doc_path} names {len(place)} sources; {len(problems)} out of place")
sys.exit(1 if problems else 0)
PY
fi
[ "$bad" = 0 ] && [ "$cycles_bad" = 0 ] && [ "$order_bad" = 0 ]
