"""Keep the memory NumPy frees for its next arrays instead of giving it back to the system.

A training step allocates its activations and gradients, frees them, and allocates the same
sizes again in the next step. glibc's malloc serves each request above its mmap threshold
(128 KiB at first, raised as mapped blocks are freed) with fresh pages from the kernel, and
gives the top of its heap back (trims it) once more than twice that threshold is free. So
every step would page-fault its arrays in again, one 4 KiB page at a time (what that cost is
measured in docs/performance.md, "What changed to get there", 6).

`reuse_freed_memory()` fixes the mmap threshold at glibc's ceiling (32 MiB) and stops the
trimming: freed blocks stay in the heap and the next step's arrays reuse them, already mapped.
The peak resident size is unchanged (it is the step's own); what changes is that it is not
returned between steps. PyTorch's CPU allocator calls the same malloc, so a benchmark that
runs both in one process gives both the setting.

The CLI calls it once for every command; the setting belongs to the process, so library code
never changes it by itself.
"""
import ctypes
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3     # mallopt's parameter numbers (glibc's malloc.h)
MMAP_THRESHOLD_MAX = 32 * 2 ** 20               # glibc's largest on 64-bit systems: HEAP_MAX_SIZE / 2
NEVER_TRIM = 2 ** 31 - 1                        # mallopt takes an int


def reuse_freed_memory():
    """Ask glibc's malloc to keep freed memory mapped for reuse (module docstring). Returns True
    when both settings took, False where the C library is not glibc (macOS, musl), where
    nothing is changed."""
    if platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(mallopt(M_TRIM_THRESHOLD, NEVER_TRIM))
