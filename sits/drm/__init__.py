"""DRM/KMS through libdrm: raw.py holds fd-level calls returning plain
values, card.py the Card that owns the fd; atomic commits build on both."""
