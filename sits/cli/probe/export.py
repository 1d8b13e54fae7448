"""`sits probe export`: the histograms served to Prometheus."""
import sys
import time

from sits.cli.probe.common import probe_session, stop_signals


def run_export(*, listen, probes, pid, comm, cgroup, lib, interval, duration):
    """Serve the latency histograms to Prometheus (classic buckets, and
    native histograms to scrapers that ask for OpenMetrics 2.0)."""
    from sits.ebpf.export import Exporter, parse_listen  # no prometheus_client yet
    addr, port = parse_listen(listen)
    session = probe_session(probes, pid, comm, cgroup, lib)
    reader = None
    with stop_signals() as stop:
        try:
            session.start()
            stop.arm()
            if "journey" in session.objects:  # --probes ...,frames: the frames' journey too
                from sits.journey.kernel import KernelJourney
                from sits.journey.stats import Journey
                reader = KernelJourney(session)
            exporter = Exporter(session, journey=Journey() if reader is not None else None)
            server = exporter.serve(addr, port)
            print(f"sits: serving http://{addr}:{server.server_port}/metrics", file=sys.stderr, flush=True)
            t_end = time.monotonic() + duration if duration else None
            next_swap = time.monotonic() + interval
            try:
                while t_end is None or time.monotonic() < t_end:
                    time.sleep(max(0.0, min(next_swap, t_end or next_swap) - time.monotonic()))
                    if time.monotonic() >= next_swap:
                        if reader is not None:  # the kernel's statistics of the interval's frames
                            exporter.add_journey(reader.collect())
                        exporter.update()
                        next_swap += interval
            finally:
                stop.armed = False
                server.shutdown()
        finally:
            stop.armed = False
            if reader is not None:
                reader.close()
            session.close()
