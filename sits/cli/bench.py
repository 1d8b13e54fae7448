"""`sits bench ...`: measurements on this machine, printed at the CLI edge."""
from __future__ import annotations

import json

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Benchmarks (GPU ones need CUDA).")


@app.command("cuda")
def cuda(
    items: str = typer.Option("abcde", help="Which items: a fused kernel, b unfused peers, c graphs, "
                                            "d ingest, e ResNet-50 feature extraction."),
    json_out: str = typer.Option(None, "--json", help="Also write the full results to this file."),
) -> None:
    """Fused conversion, peers, graphs, ingest and feature extraction on the GPU."""
    from sits.cuda import bench

    bad = set(items) - set("abcde")
    if bad:
        raise typer.BadParameter(f"unknown items {''.join(sorted(bad))}; choose from abcde")
    results = bench.run(items)  # DeviceError without a GPU: one line from main()
    for line in bench.report_lines(results):
        typer.echo(line)
    if json_out:
        with open(json_out, "w") as f:
            json.dump(results, f, indent=1, default=str)
