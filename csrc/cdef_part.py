"""The part of a C file that a cffi build declares: the text between the
`/* cdef-begin */` and `/* cdef-end */` markers, so that a struct is
written once, in its header, and each binding reads it from there."""
import os
import re

from build_bpf import INCLUDE  # csrc is no package: its folder is on the path

CDEF_PART = re.compile(r"/\* cdef-begin \*/(.*?)/\* cdef-end \*/", re.S)
#: one frame's record, the BPF journey's and the frame queue's timeline's
FRAME_H = os.path.join(INCLUDE, "sits_frame.h")


def cdef_part(path: str) -> str:
    with open(path) as f:
        return CDEF_PART.search(f.read()).group(1)
