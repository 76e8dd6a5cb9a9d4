#!/usr/bin/env python3
"""campaign.py: generates programs and runs them in every mode, in batches.

    python3 tests/genprog/campaign.py --seed S --n N [--runner build/genprog-run]
        [--work DIR] [--batch 25] [--libm] [--size small|normal]
        [--runner-args "..."] [--reduce] [--keep]

Programs S .. S+N-1 (gen.py) go through genprog-run in batches; the figures
(programs, entries, runs, mismatches, invalid programs) are printed as they
grow and at the end, and each mismatching program is copied to
DIR/failures/ (and reduced into DIR/reduced/ with --reduce).  The exit status
is 1 when some program mismatched.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--runner", default="build/genprog-run")
    ap.add_argument("--work", default="build/genprog")
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--libm", action="store_true")
    ap.add_argument("--size", default="normal")
    ap.add_argument("--runner-args", default="")
    ap.add_argument("--reduce", action="store_true", help="reduce each mismatching program")
    ap.add_argument("--keep", action="store_true", help="keep every generated program")
    ap.add_argument("--pregenerated", help="a folder of programs already generated (p<seed>.kern)")
    a = ap.parse_args()
    os.makedirs(os.path.join(a.work, "failures"), exist_ok=True)
    log = open(os.path.join(a.work, "campaign.log"), "a")
    tot = dict(programs=0, entries=0, runs=0, mismatched=0, invalid=0, ref_skipped=0, split=0, fibers=0,
               libm_accepted=0)
    failures, invalid = [], []
    modes_line = ""
    start = time.time()
    for b in range(a.seed, a.seed + a.n, a.batch):
        count = min(a.batch, a.seed + a.n - b)
        if a.pregenerated:
            folder = a.pregenerated
        else:
            folder = os.path.join(a.work, "batch")
            shutil.rmtree(folder, ignore_errors=True)
            cmd = [sys.executable, os.path.join(HERE, "gen.py"), "--seed", str(b), "--count", str(count),
                   "--out", folder, "--size", a.size] + (["--libm"] if a.libm else [])
            subprocess.run(cmd, check=True)
        files = [os.path.join(folder, "p%d.kern" % s) for s in range(b, b + count)]
        # loops are bounded, so a batch that runs for an hour hangs: killed with its
        # children, and every program of it kept as a failure
        p = subprocess.Popen([a.runner] + a.runner_args.split() + files, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            output = p.communicate(timeout=3600)[0]
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            output = p.communicate()[0] + "\ncampaign: the batch ran past an hour\n"
        log.write(output)
        log.flush()
        summary = None
        for line in output.splitlines():
            m = re.match(r"(mismatch|invalid) (\S+?):", line)
            if m:
                path = m.group(2)
                if m.group(1) == "mismatch" and path not in failures and os.path.exists(path):
                    failures.append(path)
                    shutil.copy(path, os.path.join(a.work, "failures"))
                if m.group(1) == "invalid" and path not in invalid:
                    invalid.append(path)
                    shutil.copy(path, os.path.join(a.work, "failures"))
            if line.startswith("genprog-run:") and " files: " in line:
                summary = line
            m = re.match(r"genprog-run: kernels with barriers: (\d+) split, (\d+) on fibers", line)
            if m:
                tot["split"] += int(m.group(1))
                tot["fibers"] += int(m.group(2))
            if line.startswith("cuda: skipped"):
                modes_line = line
        if summary is None:
            print("campaign: the runner gave no summary (status %d) on %s .. %s:\n%s" %
                  (p.returncode, files[0], files[-1], output[-3000:]))
            failures += [f for f in files if f not in failures]
            for f in files:
                shutil.copy(f, os.path.join(a.work, "failures"))
        else:
            m = re.search(r"(\d+) entries, (\d+) runs in \d+ modes \(([^;]*); children: ([^,]*(?:, avx2)?), "
                          r"(\d+) mismatches(?:, (\d+) float differences of libm programs accepted)?; "
                          r"(\d+) kernels", summary)
            if m:
                tot["entries"] += int(m.group(1))
                tot["runs"] += int(m.group(2))
                tot["libm_accepted"] += int(m.group(6) or 0)
                tot["ref_skipped"] += int(m.group(7))
                modes = m.group(3) + " + children " + m.group(4)
        tot["programs"] += count
        tot["mismatched"] = len(failures)
        tot["invalid"] = len(invalid)
        if a.keep and not a.pregenerated:
            keep = os.path.join(a.work, "programs")
            os.makedirs(keep, exist_ok=True)
            for f in files:
                shutil.copy(f, keep)
        print("campaign: %d programs (%d entries, %d mode runs), %d mismatched, %d invalid, %.0f s" %
              (tot["programs"], tot["entries"], tot["runs"], tot["mismatched"], tot["invalid"],
               time.time() - start), flush=True)
    print("campaign: seeds %d..%d: %d programs, %d entries, %d runs in modes %s; %d mismatching "
          "programs, %d invalid; %d float differences of libm programs between ISAs accepted; "
          "%d kernels with warp collectives not evaluated by ref_eval; "
          "kernels with barriers: %d split, %d on fibers; %s" %
          (a.seed, a.seed + a.n - 1, tot["programs"], tot["entries"], tot["runs"],
           locals().get("modes", "?"), tot["mismatched"], tot["invalid"], tot["libm_accepted"],
           tot["ref_skipped"],
           tot["split"], tot["fibers"], modes_line or "cuda run where available"))
    for f in failures:
        print("  mismatch: " + os.path.join(a.work, "failures", os.path.basename(f)))
    for f in invalid:
        print("  invalid: " + os.path.join(a.work, "failures", os.path.basename(f)))
    if a.reduce and failures:
        os.makedirs(os.path.join(a.work, "reduced"), exist_ok=True)
        for f in failures:
            src = os.path.join(a.work, "failures", os.path.basename(f))
            dst = os.path.join(a.work, "reduced", os.path.basename(f))
            subprocess.run([sys.executable, os.path.join(HERE, "reduce.py"), "--runner", a.runner,
                            "--runner-args", a.runner_args, src, "-o", dst])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
