/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kloc-count's test hooks, built only into tests/fake-qemu.c's copy of the
 * plugin (make fake, -DKLOC_TEST): start values no test could reach by
 * running, and a point inside an access where a test opens a window.
 */
#ifndef KLOC_TEST_H
#define KLOC_TEST_H

#include <stdint.h>

/* kloc-count.c: the window epoch, and the first load count of window records */
void kloc_test_set_epoch(uint64_t e);
void kloc_test_set_win_base(uint64_t n);
/* kloc-count.c: a start or end marker of phase, as if vCPU vcpu_index ran it */
void kloc_test_marker(unsigned int vcpu_index, unsigned int kind, unsigned int phase);
/* fake-qemu.c: called as an access sets up its window record */
void kloc_test_window_record(void);

#endif /* KLOC_TEST_H */
