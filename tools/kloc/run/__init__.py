# SPDX-License-Identifier: GPL-2.0
"""make run: the whole mission, part by part, into one run.json and one screen."""
