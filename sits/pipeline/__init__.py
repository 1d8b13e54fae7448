"""The chain: one source, its consumers (display, writeback check, CUDA,
user code) and one event loop (pipeline.py); the frame queue in C
(frame_queue.c); set-up from options (capture.py); the Python API
(chain.py: sits.open_chain)."""
