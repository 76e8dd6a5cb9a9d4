#!/bin/sh
# run.sh: the front end must never crash, hang, leak or trip a sanitizer, on
# any input.  Feeds the ASan/UBSan build of tests/robust/check_main.c
#   - every prefix of every examples/, stdlib/ and tests/golden/ .kern file
#     (every k-th prefix when the files are big, to stay within ~2 minutes),
#   - 300 strings of random bytes and 300 random token soups (fixed seed, so a
#     failure reproduces),
# each with a timeout.  A run passes when it exits 0, 1 or 2 with no sanitizer
# report.  Failing inputs are saved under $KJIT_ROBUST_FAILURES (default
# /tmp/kjit-robust-failures).  Run from the repository root:
#
#   tests/robust/run.sh build/kjit-check-asan
set -eu
binary=${1:-build/kjit-check-asan}
if [ ! -x "$binary" ]; then
    echo "run.sh: $binary is not built (make test-robust builds it)" >&2
    exit 2
fi
exec python3 - "$binary" <<'PY'
import glob, os, random, subprocess, sys
from concurrent.futures import ThreadPoolExecutor

binary = sys.argv[1]
failures_dir = os.environ.get("KJIT_ROBUST_FAILURES", "/tmp/kjit-robust-failures")
PREFIX_BUDGET = 4000      # prefix runs in all, spread evenly over the bytes
TIMEOUT_S = 10            # per run; a hang is a failure

env = dict(os.environ)
env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0:exitcode=86"
env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1:exitcode=87"

files = sorted(set(glob.glob("examples/*.kern") + glob.glob("stdlib/*.kern")
                   + glob.glob("tests/golden/**/*.kern", recursive=True)))
cases = []  # (name, bytes)
total = sum(os.path.getsize(f) for f in files)
step = max(1, -(-total // PREFIX_BUDGET))
for path in files:
    data = open(path, "rb").read()
    cuts = sorted(set(range(0, len(data), step)) | {len(data)})
    cases += [(f"{path}[:{n}]", data[:n]) for n in cuts]

rng = random.Random(20240607)
for i in range(300):
    n = rng.randrange(0, 400)
    cases.append((f"random-bytes-{i}", bytes(rng.randrange(256) for _ in range(n))))

vocabulary = """fn let if else for in while break continue return import true false
@vectorize @kernel @ ( ) { } [ ] , ; : . -> ? + - * / % ** & | ^ ~ << >> && || !
== != < <= > >= = += -= *= /= %= &= |= ^= <<= >>= x y a b i n f32 f64 i32 i64 u8
c64 c128 bool range grid gridsize threadIdx blockIdx shared local syncthreads
atomic_add len sqrt complex real imag shape 0 1 42 0xff 1_000 1.0 .5 2. 1e-3
6.02e23 99999999999999999999999 1e999 0x 1__0 $ # /* */ // \n f32[] f32[,]
f32[,,,,,,,,] range( fn( a[i][j]""".split()
for i in range(300):
    n = rng.randrange(1, 120)
    soup = []
    for _ in range(n):
        soup.append(rng.choice(vocabulary).replace("\\n", "\n"))
        soup.append(rng.choice([" ", " ", "\n", "", "\t"]))
    cases.append((f"token-soup-{i}", "".join(soup).encode()))

def run(case):
    name, data = case
    try:
        proc = subprocess.run([binary, "-"], input=data, capture_output=True,
                              timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return name, data, f"timed out after {TIMEOUT_S}s"
    err = proc.stderr.decode(errors="replace")
    for marker in ("Sanitizer", "runtime error:", "internal error"):
        if marker in err:
            return name, data, f"exit {proc.returncode}: {err[-3000:]}"
    if proc.returncode not in (0, 1, 2):
        return name, data, f"exit {proc.returncode}: {err[-3000:]}"
    return None

with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
    results = list(pool.map(run, cases))
failed = [r for r in results if r]
for i, (name, data, why) in enumerate(failed[:20]):
    os.makedirs(failures_dir, exist_ok=True)
    saved = os.path.join(failures_dir, f"failure-{i}.kern")
    with open(saved, "wb") as out:
        out.write(data)
    print(f"FAIL {name} (input saved as {saved}): {why}")
print(f"robustness: {len(results) - len(failed)} passed, {len(failed)} failed"
      f" ({len(files)} files with a prefix every {step} bytes, 300 random, 300 soups)")
sys.exit(1 if failed else 0)
PY
