"""Pipelines on top of the interfaces: capture_to_kms.py (V4L2 -> KMS)."""
