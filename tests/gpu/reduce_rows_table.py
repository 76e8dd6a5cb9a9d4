"""tests/gpu/reduce_rows_table.py WORK A B: the table of two variants' runs of
tests/gpu/reduce_rows.cu (WORK/A.1.txt .. WORK/B.3.txt, three rounds each):
each row's milliseconds, B / A of the medians, and whether every run gave the
same bits.  Exits 1 when a row is missing or the bits differ.  Shared by
reduce_forms.sh (switch variants in one bundle) and reduce_columns.sh (two
bundles)."""
import statistics
import sys

work, a, b = sys.argv[1:4]
rows = ["sum_f32_1e8", "sum_f64_1e8", "dot_f32_1e8", "sum_axis1_10000x10000", "sum_axis0_10000x10000"]
ms, hashes = {}, {}
for v in (a, b):
    for r in (1, 2, 3):
        for line in open(f"{work}/{v}.{r}.txt"):
            p = line.split()
            if len(p) >= 4 and p[0] in rows:
                ms.setdefault((v, p[0]), []).append(float(p[1]))
                hashes.setdefault(p[0], set()).add(p[3])
print(f"| row | {a} ms (3 rounds) | {b} ms (3 rounds) | {b} / {a} (medians) | same bits |")
print("| --- | --- | --- | ---: | --- |")
bad = False
for row in rows:
    m, n = ms.get((a, row), []), ms.get((b, row), [])
    if len(m) != 3 or len(n) != 3:
        print(f"| {row} | missing | missing | - | - |")
        bad = True
        continue
    same = len(hashes[row]) == 1
    bad = bad or not same
    print(f"| {row} | {', '.join(f'{x:.4f}' for x in m)} | {', '.join(f'{x:.4f}' for x in n)} | "
          f"{statistics.median(n) / statistics.median(m):.3f} | {'yes' if same else 'NO'} |")
sys.exit(1 if bad else 0)
