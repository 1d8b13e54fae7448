"""FdOwner: one owner per fd; detach() hands it on (to the C flip loop)."""
import gc
import os

import pytest

from sits.fd import FdOwner


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_close_and_collection_close_the_fd():
    r, w = os.pipe()
    a, b = FdOwner(r), FdOwner(w)
    a.close()
    assert not _is_open(r) and a.closed
    del b
    gc.collect()
    assert not _is_open(w)


def test_detach_hands_the_fd_on_and_never_closes_it():
    r, w = os.pipe()
    os.close(w)
    owner = FdOwner(r)
    assert owner.detach() == r
    assert owner.closed
    owner.close()
    del owner
    gc.collect()
    assert _is_open(r)   # the new owner's to close
    os.close(r)


def test_a_closed_owner_has_nothing_to_detach():
    r, w = os.pipe()
    os.close(w)
    owner = FdOwner(r)
    owner.close()
    with pytest.raises(ValueError):
        owner.detach()
