# SPDX-License-Identifier: GPL-2.0
#
# KUnit tests of mm/.

obj-$(CONFIG_PERCPU_LOCALITY_KUNIT_TEST) += percpu_locality_kunit.o
