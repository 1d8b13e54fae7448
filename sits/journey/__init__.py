"""A frame's journey from the sensor to the screen: one record per frame,
from the kernel (sits probe frames) or from sits' own pipeline
(sits capture --timeline), in one schema (record.py)."""
