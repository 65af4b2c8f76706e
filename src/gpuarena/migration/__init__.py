"""Migration checks: run an application ported to another stack, compare its outputs with the
reference stack's golden ones, and score it (docs/migration.md)."""
