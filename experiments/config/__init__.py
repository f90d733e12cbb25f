"""The config: the typed schema, its checks, per-role attention, unused and inert keys, user errors."""
