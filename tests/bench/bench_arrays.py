"""The Python references' arrays placed as kjit's benchmark programs place
theirs (tests/bench/bench_common.h, bench_alloc): as NumPy places an array of
4 MiB or more in a fresh process, an mmap of its own with the data 16 bytes
into its first page and the whole pages inside advised to transparent huge
pages.  A process that has freed such a block before (NumPy's temporaries)
has glibc's mmap threshold raised, and its later arrays land on the heap, in
4 KiB pages; `fresh` copies an array out of there, so that a memory-bound row
compares kjit with NumPy and Numba on the same kind of pages.  NumPy's own
temporaries keep glibc's way, as a NumPy program's do."""
import mmap

import numpy as np

HUGE_BYTES = 4 << 20
HEADER = 16


def fresh(a):
    """a, or for 4 MiB or more a copy of it placed as above."""
    a = np.asarray(a)
    if a.nbytes < HUGE_BYTES:
        return a
    page = mmap.PAGESIZE
    buf = mmap.mmap(-1, (a.nbytes + HEADER + page - 1) // page * page)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        buf.madvise(mmap.MADV_HUGEPAGE, page, len(buf) - page)
    out = np.frombuffer(buf, dtype=a.dtype, count=a.size, offset=HEADER).reshape(a.shape)
    out[...] = a
    return out
