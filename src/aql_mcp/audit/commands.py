"""`aql-mcp audit verify | export | prune` (docs/audit.md): run against the store the settings name,
beside the running service or from a CronJob."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path

from aql_mcp.audit.exporter import Follower, export
from aql_mcp.audit.record import moment, timestamp
from aql_mcp.audit.verifier import verify
from aql_mcp.exceptions import UpstreamUnavailable
from aql_mcp.settings import Settings
from aql_mcp.store.factory import opened_audit

DAY_SECONDS = 86_400
# Exit status when the store failed the command (2 is a refused configuration, main.py).
STORE_FAILED = 3
SettingsOf = Callable[[argparse.Namespace], Settings]


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser], settings_of: SettingsOf) -> None:
    """The `audit` command and its three subcommands; `settings_of` reads `--config` as `serve` does."""
    audit = commands.add_parser("audit", help="verify, export or prune the audit trail")
    actions = audit.add_subparsers(required=True, metavar="ACTION")
    check = actions.add_parser("verify", help="check every chain; exit 1 naming the first broken record of each")
    _settings_arguments(check)
    check.set_defaults(run=lambda args: _run(_verify(settings_of(args))))
    dump = actions.add_parser("export", help="print the records as NDJSON")
    _settings_arguments(dump)
    dump.add_argument("--since", type=_moment, help="ISO 8601 date or time (UTC unless it says)")
    dump.add_argument("--until", type=_moment, help="ISO 8601 date or time, excluded")
    dump.add_argument("--follow", action="store_true", help="keep printing new records (no --until)")
    dump.add_argument("--every", type=float, default=1.0, help="seconds between looks for new records (--follow)")
    dump.set_defaults(run=lambda args: _run(_export(settings_of(args), args)))
    prune = actions.add_parser("prune", help="delete records older than the retention, keeping chains verifiable")
    _settings_arguments(prune)
    prune.add_argument("--older-than-days", type=int, help="default: audit.retention_days")
    prune.set_defaults(run=lambda args: _run(_prune(settings_of(args), args.older_than_days)))


def _run(command: Coroutine[None, None, int]) -> int:
    """The command's status; 3 when the store failed it (unreachable, or the role lacks a grant: the
    log line before says which, docs/audit.md "PostgreSQL roles")."""
    try:
        return asyncio.run(command)
    except UpstreamUnavailable:
        print("aql-mcp audit: the store refused the command or could not be reached", file=sys.stderr)
        return STORE_FAILED


def _settings_arguments(command: argparse.ArgumentParser) -> None:
    """The settings of the service whose trail it is: its `--config`, and `--dev` as `serve --dev` reads them."""
    command.add_argument("--config", type=Path, help="YAML config file of the service (see config/default.yaml)")
    command.add_argument("--dev", action="store_true", default=None, help="the settings of `serve --dev`")


def _moment(value: str) -> str:
    """An ISO 8601 date or time as the trail's timestamps are written (UTC, microseconds)."""
    try:
        return moment(value)
    except ValueError:
        raise argparse.ArgumentTypeError("not an ISO 8601 date or time (2026-01-31, 2026-01-31T08:00:00Z)") from None


async def _verify(settings: Settings) -> int:
    async with opened_audit(settings) as audit:
        report = await verify(audit)
    for broken in report.broken:
        print(f"broken: chain {broken.chain} record {broken.seq}: {broken.reason}")
    verdict = "ok" if report.ok else f"{len(report.broken)} broken chain(s)"
    print(f"audit verify: {report.chains} chain(s), {report.records} record(s): {verdict}")
    return 0 if report.ok else 1


async def _export(settings: Settings, args: argparse.Namespace) -> int:
    out = sys.stdout.buffer

    def write(data: bytes) -> None:
        out.write(data)

    async with opened_audit(settings) as audit:
        if not args.follow:
            await export(audit, write, since=args.since, until=args.until)
            out.flush()
            return 0
        if args.until is not None:
            print("aql-mcp audit export: --follow takes no --until", file=sys.stderr)
            return 2
        await Follower(audit, write, since=args.since).run(args.every, out.flush)
    return 0


async def _prune(settings: Settings, days: int | None) -> int:
    keep = settings.audit.retention_days if days is None else days
    before = timestamp(time.time() - keep * DAY_SECONDS)
    async with opened_audit(settings) as audit:
        deleted = await audit.prune(before, now=timestamp())
    print(f"audit prune: {deleted} record(s) written before {before} deleted; checkpoints keep the chains verifiable")
    return 0
