# SPDX-License-Identifier: GPL-2.0
"""The package as a series of changes.

The changes, applying them, installing them into a tree, and exporting them as mails.
"""
