"""A stage's work done in Python: for work that a well-kept Python library
does (a JPEG decoder), the stage's worker thread calls back into Python
(cffi's `extern "Python"`, declared in csrc/build_kernel.py: cffi takes
the GIL on that thread, and the library releases it while it decodes).
The loop's thread never runs it: its steady state stays in C.

A work is an object with `make(S, index, bytesused, out) -> 0 or an errno`
(S: the stage's struct; the input's bytes at S.in_ptr[index], the output's
at S.out_ptr[out], S.out_bytes of them), passed to Stage as its work state
through `handle()`.
"""
from __future__ import annotations

import errno

from sits._kernel import ffi, lib

#: the struct sits_stage_work of every Python work (its function: below)
WORK = ffi.new("struct sits_stage_work *", {"work": lib.sits_python_work})


def _failed(exc_type, exc, tb) -> int:
    """What escapes a work's make(): counted as the frame's error, the stage goes on."""
    return errno.EIO


@ffi.def_extern(onerror=_failed)
def sits_python_work(S, index, bytesused, out):
    return ffi.from_handle(S.work_state).make(S, index, bytesused, out)


def handle(work):
    """`work` as a stage's work state (the Stage keeps it, and so the work, alive)."""
    return ffi.new_handle(work)
