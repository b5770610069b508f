"""Command-line interface: a thin click group; each subcommand lives in its own module.

``main(argv) -> int`` turns errors into exit codes in one place (0 ok, 1 gate tripped, 2 usage or
unreadable input).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from traceread.errors import EXIT_USAGE, TracereadError

# Subcommands, each in traceread.cli.<name>; a module not built yet is simply not offered.
COMMANDS = ("analyze", "info", "gaps", "kernels")


class _LazyGroup(click.Group):
    """A group that imports a subcommand's module only when that subcommand runs (or ``--help``
    lists it): ``traceread info`` then never imports the rules, metrics or renderers."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | {n for n in COMMANDS if _module(n) is not None})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None and cmd_name in COMMANDS and _module(cmd_name) is not None:
            cmd = importlib.import_module(f"traceread.cli.{cmd_name}").command
            self.add_command(cmd, cmd_name)
        return cmd


def _module(name: str) -> object | None:
    return importlib.util.find_spec(f"traceread.cli.{name}")


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="traceread")
def cli() -> None:
    """traceread: why is this GPU training run below its possible MFU?"""


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
