"""`kstream plan`: print the plan of a job as text, without running it.

Loads the job as `kstream run` does and plans it for `--workers`; the text is
`kstream.dataflow.describe`'s. No cluster is contacted.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kstream.tools.cli.options import AT_LEAST_ONE, JobNameOption, ParamsOption, SpecArgument

__all__ = ["plan_command"]


def plan_command(
    spec: SpecArgument,
    param: ParamsOption = None,
    workers: Annotated[
        int, typer.Option("--workers", help="Worker processes to plan for.", callback=AT_LEAST_ONE)
    ] = 2,
    job_name: JobNameOption = None,
) -> None:
    """Print a job's stages, inputs, fused operators, parallelism and channel topics."""
    from kstream.dataflow.describe import describe
    from kstream.dataflow.plan import plan
    from kstream.tools.spec import load_job, parse_params

    job = load_job(spec, parse_params(param or []))
    if job_name is not None:
        job.rename(job_name)
    # Plain text: names such as "kafka:a" must not become markup or emoji.
    typer.echo("\n".join(describe(plan(job, workers))))
