"""`sits probe frames`: every frame's journey from the sensor to the screen,
timed by the kernel, for any V4L2 -> KMS pipeline (sits, GStreamer,
libcamera's cam): a live view, or a report at the end."""
import os
import shutil
import sys
import time

from sits.cli.probe.common import probe_session, stop_child, stop_signals
from sits.errors import SitsError, UsageError

#: seconds between ring drains (--stream): the programs submit without
#: waking us, and a drain has a fixed cost beside its records' (docs/probe.md),
#: so one a second; the ring (journey.kernel.RING_BYTES) holds a second's
#: records of dozens of pipelines at 240 fps, and a ring that fills is
#: counted and shown (records lost, ring full).
DRAIN_S = 1.0


def run_frames(*, command, duration, as_json, markdown, output, stream, display_latency_ms, pid, comm,
               cgroup, interval):
    """Follow every frame (captured, dequeued, committed, on screen, replaced,
    requeued) of a process, or of COMMAND: per-stage latency, drops by
    cause, glass to glass.  Usage: sits probe frames [-p PID | --comm NAME] [OPTIONS] [-- COMMAND ...]"""
    from sits.journey.record import Writer
    command = list(command)
    if as_json and markdown:
        raise UsageError("--json and --markdown exclude each other")
    if command and (pid or comm):
        raise UsageError("give a COMMAND or --pid/--comm, not both")
    if duration is not None and duration <= 0:
        raise UsageError("--duration must be positive")
    if interval <= 0:
        raise UsageError("--interval must be positive")
    if display_latency_ms < 0:
        raise UsageError("--display-latency-ms must not be negative")
    live = not (as_json or markdown or output) and sys.stdout.isatty()
    if duration is None and not command and not live:
        raise UsageError("give --duration S, or a command after --")
    for path, what in ((stream, "--stream"), (output, "--output")):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise UsageError(f"{what} {path}: no such directory")
    from sits.journey.kernel import configure
    from sits.journey.stats import Journey
    journey = Journey(display_latency_ms=display_latency_ms)
    # records only where an output shows them: the stream, the live view's waterfall
    session = probe_session("frames", pid, comm, cgroup, None, follow=bool(command),
                            configure=configure(journey, records=bool(stream) or live))
    writer = Writer(stream) if stream else None
    report = None
    with stop_signals() as stop:
        try:
            report = _follow(session, writer, command, duration, journey, interval, live, stop)
        finally:
            stop.armed = False
            if writer is not None:
                writer.close()
    if report is None:
        return
    text = _report_text(report, as_json=as_json or bool(output and output.endswith(".json")))
    if output:
        with open(output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def _follow(session, writer, command, duration, journey, interval, live, stop):
    """Follow until the command exits or the duration ends. Without the
    live view or a stream nothing is read until the end: the programs keep
    the statistics, and the loop sleeps until the command's exit (its
    pidfd) or the deadline."""
    import selectors

    from sits.journey import record
    from sits.journey.kernel import KernelJourney, kernel_report, untimed_stages
    child = exit_code = pidfd = None
    reader = None
    view = _LiveView() if live else None
    sel = selectors.DefaultSelector()
    try:
        session.start()
        if "journey" not in session.objects:
            reasons = sorted(set(session.skipped.values()))
            raise SitsError("no stage of a frame's journey can be timed on this kernel: "
                            + (reasons[0] if reasons else "nothing attached"))
        reader = KernelJourney(session)
        untimed = untimed_stages(session)
        t0 = time.monotonic()
        if command:
            child = session.spawn(command)
            pidfd = os.pidfd_open(child)
            sel.register(pidfd, selectors.EVENT_READ)
        stop.arm()
        deadline = t0 + duration if duration is not None else None
        next_view = t0
        while True:
            now = time.monotonic()
            if child is not None:
                done, status = os.waitpid(child, os.WNOHANG)
                if done:
                    exit_code, child = os.waitstatus_to_exitcode(status), None
                    sel.unregister(pidfd)
                    if duration is None:
                        break
            if deadline is not None and now >= deadline:
                break
            if writer is not None:
                rows = reader.drain_rows()
                writer.write_rows(rows)
                if view is not None:
                    journey.recent.extend(map(record.from_values, rows[-journey.recent.maxlen:]))
            elif view is not None:
                journey.recent.extend(reader.drain(last=journey.recent.maxlen))
            if view is not None and now >= next_view:
                journey.merge(reader.collect())
                view.show(journey, untimed, session.drops())
                next_view += interval
            wake = [t for t in (deadline, next_view if view is not None else None,
                                now + DRAIN_S if writer is not None else None) if t is not None]
            sel.select(max(0.0, min(wake) - time.monotonic()) if wake else None)
    finally:
        stop.armed = False
        report = None
        if reader is not None:
            report = kernel_report(reader, journey, session, also=writer.write if writer else None)
            report["command"] = command or None
        if view is not None:
            view.close()
        session.close()
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
        if child is not None:  # the duration ended first: stop the command
            exit_code = stop_child(child)
    if report is not None:
        report["exit_code"] = exit_code
        if writer is not None:
            report["stream"] = {"path": writer.path, "frames": writer.written}
    return report


def _report_text(report: dict, *, as_json: bool) -> str:
    if as_json:
        import json
        return json.dumps(report, indent=2) + "\n"
    from sits.journey.report import to_markdown
    text = to_markdown(report)
    for stage, why in report["untimed"].items():
        text += f"\n- not timed: {stage}: {why}"
    if report["hooks"]["why"]:
        text += f"\n- kernel functions hooked by kprobes: {report['hooks']['why']}"
    lost = report["frames"]["lost"]
    if any(lost.values()):
        text += f"\n- records lost: {lost['ring_full']} (ring full), {lost['map_full']} (too many frames in flight)"
    return text + "\n"


class _LiveView:
    """The live view, redrawn in place (the terminal's own size)."""

    def __init__(self):
        sys.stdout.write("\x1b[?25l")  # no cursor while drawing

    def show(self, journey, untimed, drops) -> None:
        from sits.journey.tui import render
        # a terminal that reports no size (0x0: a fresh pty, a serial
        # console) gets 80x24 rather than an empty view
        size = shutil.get_terminal_size()
        text = render(journey, width=size.columns, frames=max(4, size.lines - 16))
        foot = [f"not timed: {s}: {why}" for s, why in untimed.items()]
        if drops["frame_ring"] or drops["frame_map_full"]:
            foot.append(f"records lost: {drops['frame_ring']} ring full, {drops['frame_map_full']} map full")
        sys.stdout.write("\x1b[H\x1b[2J" + text + ("\n" + "\n".join(foot) if foot else "") + "\n")
        sys.stdout.flush()

    def close(self) -> None:
        sys.stdout.write("\x1b[?25h")
        sys.stdout.flush()
