"""`sits probe list`: the probe points, and why any are missing here."""


def run_list(*, lib, as_json):
    """Probe points available on this kernel, and why any are missing."""
    import json

    from sits.ebpf.points import point_availability
    from sits.ebpf.system import find_avcodec
    lib = lib or find_avcodec()
    items = point_availability(avcodec_lib=lib)
    if as_json:
        print(json.dumps([{"name": p.name, "group": p.group, "key": p.key, "what": p.what,
                           "available": reason is None, "reason": reason} for p, reason in items],
                         indent=2))
        return
    from rich.console import Console
    from rich.table import Table
    t = Table(title="sits probe points")
    for col in ("probe", "group", "key", "measures", "status"):
        t.add_column(col)
    for p, reason in items:
        t.add_row(p.name, p.group, p.key, p.what,
                  "[green]available[/]" if reason is None else f"[yellow]missing[/]: {reason}")
    Console().print(t)
