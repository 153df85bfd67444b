"""Write the billing job's inputs from the control plane: plan prices per tenant and group lag SLOs."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from tenants.services.analytics import export_analytics_inputs, yesterday


class Command(BaseCommand):
    help = "Export plan prices and consumer-group SLOs for a day under the metering root (object store)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--date", help="the UTC day (YYYY-MM-DD); yesterday by default")
        parser.add_argument("--output", default=None, help="metering root URL (MQ_METERING_URL)")
        parser.add_argument("--force", action="store_true", help="replace an existing export of the day")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            day = date.fromisoformat(options["date"]) if options["date"] else yesterday()
        except ValueError as exc:
            raise CommandError(f"--date: {exc}") from exc
        root = options["output"] or settings.MQ_ANALYTICS["INPUT_URL"]
        written = export_analytics_inputs(root, day, force=options["force"])
        for tree, rows in written.items():
            state = f"{rows} rows" if rows else "kept the existing export"
            self.stdout.write(f"{tree} {day}: {state} under {root}")
