"""V4L2: declarations come from sits._kernel; raw.py holds fd-level calls,
device.py the objects that own a device fd."""
