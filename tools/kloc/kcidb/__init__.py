# SPDX-License-Identifier: GPL-2.0
"""KCIDB v5.3, below its two users (review/kcidb.py, lava/kcidb.py): what their
submissions share (record) and the schema's checks (schema)."""
