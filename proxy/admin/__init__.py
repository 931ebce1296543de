"""The admin's `dpproxy` commands: configuration, analysts, budgets, audit review, report."""
