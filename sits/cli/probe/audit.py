"""`sits probe audit`: record for a while, or while a command runs, then report."""
import os
import sys
import time

from sits.cli.probe.common import probe_session, rows_table, stop_child, stop_signals
from sits.errors import UsageError


def run_audit(*, command, duration, as_json, markdown, output, probes, pid, comm, cgroup, lib, threshold,
              interval, top_n, per_thread, stream):
    """Record for a while (or while COMMAND runs) and report statistics, hot
    spots, drops and probe overhead.  Usage: sits probe audit [OPTIONS] [-- COMMAND ...]"""
    from sits.ebpf.report import Aggregate, audit_report, parse_thresholds
    command = list(command)
    if as_json and markdown:
        raise UsageError("--json and --markdown exclude each other")
    if duration is None and not command:
        raise UsageError("give --duration S, or a command after --")
    if duration is not None and duration <= 0:
        raise UsageError("--duration must be positive")
    if interval <= 0:
        raise UsageError("--interval must be positive")
    thresholds = parse_thresholds(threshold)
    stream_file = _open_stream(stream) if stream else None
    session = probe_session(probes, pid, comm, cgroup, lib, follow=bool(command), stats=True,
                       per_thread=per_thread, stream=bool(stream))
    agg = Aggregate(session, thresholds)
    ring = writer = frames = None
    child, exit_code = None, None
    t0 = time.monotonic()
    report = None
    with stop_signals() as stop:
        try:
            session.start()
            if stream_file is not None:
                from sits.ebpf.ringbuf import EventWriter, ring_consumer
                ring = ring_consumer(session)
                writer = EventWriter(stream_file, session.fence_names)
            frames = _frames_follower(session)
            t0 = time.monotonic()
            if command:
                child = session.spawn(command)
            stop.arm()
            deadline = t0 + duration if duration is not None else None
            next_swap = t0 + interval
            while True:
                now = time.monotonic()
                if child is not None:
                    done, status = os.waitpid(child, os.WNOHANG)
                    if done:
                        exit_code = os.waitstatus_to_exitcode(status)
                        child = None
                        if duration is None:
                            break
                if deadline is not None and now >= deadline:
                    break
                if now >= next_swap:
                    agg.add(*session.collect())
                    next_swap += interval
                if ring is not None:
                    writer.write(ring.drain(copy=False))
                poll = 0.02 if ring is not None else 0.05 if child else None
                wake = min(x for x in (next_swap, deadline, now + poll if poll else None) if x)
                time.sleep(max(0.0, wake - time.monotonic()))
        finally:
            stop.armed = False  # a second signal must not cut the report short
            elapsed = time.monotonic() - t0
            if session.objects:
                agg.add(*session.collect())
                streamed = None
                if ring is not None:
                    writer.write(ring.drain(copy=False))
                    streamed = {"path": stream, "events": writer.events}
                report = audit_report(agg, session, duration_s=elapsed, command=command or None,
                                      exit_code=exit_code, top_n=top_n, stream=streamed)
                if frames is not None:
                    from sits.journey.kernel import kernel_report
                    j = kernel_report(*frames, session)
                    report["frames"] = dict(j["frames"], untimed=j["untimed"])
            if ring is not None:
                ring.close()
            if stream_file is not None:
                stream_file.close()
            session.close()
            if child is not None:  # the duration ended first: stop the command
                code = stop_child(child)
                report and report.update(exit_code=code)
    if report is None:
        return
    if as_json:
        import json
        text = json.dumps(report, indent=2) + "\n"
    elif markdown:
        text = audit_markdown(report) + "\n"
    else:
        text = None
    if output:
        with open(output, "w") as f:
            f.write(text if text is not None else audit_markdown(report) + "\n")
        if text is None:
            _print_report(report)
    elif text is not None:
        sys.stdout.write(text)
    else:
        _print_report(report)


def audit_markdown(report: dict) -> str:
    """The audit report in markdown, with the section "Where frames lose
    time" when it carries the frames' journey."""
    from sits.ebpf.report import to_markdown
    frames = None
    if report.get("frames"):
        from sits.journey.report import to_markdown as frames_markdown
        frames = frames_markdown(report)
    return to_markdown(report, frames)


def _frames_follower(session):
    """(reader, statistics) of the frames' journey when the "frames" group
    runs (--probes ...,frames), else None."""
    if "journey" not in session.objects:
        return None
    from sits.journey.kernel import KernelJourney
    from sits.journey.stats import Journey
    return KernelJourney(session), Journey()


def _open_stream(path: str):
    try:
        return open(path, "w", buffering=1 << 20)
    except OSError as exc:
        raise UsageError(f"--stream {path}: {exc.strerror}") from None


def _print_report(report: dict) -> None:
    from rich.console import Console
    console = Console()
    console.print(rows_table(report["rows"], title=f"sits probe audit: {report['duration_s']} s"))
    skipped = [p for p in report["probes"] if p["status"] != "attached"]
    for p in skipped:
        console.print(f"[yellow]skipped[/] {p['name']}: {p['reason']}")
    for f in report["hot_spots"]["flagged"]:
        console.print(f"[red]HOT[/] {f['probe']} {f['key']} in {f['comm']} ({f['pid']}): {f['reason']}")
    console.print("drops: " + ", ".join(f"{k} {v}" for k, v in report["drops"].items()))
    if report.get("stream"):
        st = report["stream"]
        console.print(f"streamed {st['events']} samples to {st['path']} ({st['lost']} lost: ring buffer full)")
