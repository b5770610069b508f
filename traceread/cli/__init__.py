"""Command-line interface: a thin click group; each subcommand lives in its own module.

``main(argv) -> int`` turns errors into exit codes in one place (0 ok, 1 gate tripped, 2 usage or
unreadable input).
"""

from __future__ import annotations

import sys

import click

from traceread.errors import EXIT_USAGE, TracereadError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="traceread")
def cli() -> None:
    """traceread: why is this GPU training run below its possible MFU?"""


def _register() -> None:
    for mod_name in ("analyze", "info", "gaps", "kernels", "scan", "diff"):
        try:
            mod = __import__(f"traceread.cli.{mod_name}", fromlist=["command"])
        except ModuleNotFoundError as exc:  # subcommand not built yet
            if exc.name != f"traceread.cli.{mod_name}":
                raise
            continue
        cli.add_command(mod.command)


_register()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (tests call this directly)."""
    try:
        rv = cli.main(args=argv, prog_name="traceread", standalone_mode=False)
    except TracereadError as exc:
        click.echo(f"traceread: error: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("traceread: aborted", err=True)
        return EXIT_USAGE
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE if exc.exit_code not in (0, 1) else exc.exit_code
    except BrokenPipeError:
        return 0
    return int(rv or 0)


if __name__ == "__main__":
    sys.exit(main())
