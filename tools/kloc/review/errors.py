# SPDX-License-Identifier: GPL-2.0
"""What stops make review: ReviewError."""

from __future__ import annotations

from kloc.errors import KlocError


class ReviewError(KlocError):
    """The review cannot go on; the message says why and what to do."""
