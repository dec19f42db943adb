# SPDX-License-Identifier: GPL-2.0
import sys

from kloc.cli import main

sys.exit(main())
