/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Window markers for the kloc-count QEMU plugin.
 *
 * kloc_mark_start(phase) and kloc_mark_end(phase) each execute one
 * instruction that is an architectural no-op on real hardware and under
 * QEMU without the plugin: on x86_64 a 7-byte NOP, nopl disp32(%rax)
 * (0f 1f 80 <disp32>), which reads no memory; on arm64 a MOVZ to the zero
 * register, movz xzr, #imm16, lsl #48, whose result is discarded. The
 * payload (magic, start or end, phase) sits in disp32 and imm16; the plugin
 * finds the markers when QEMU translates them, and counts between a start
 * and the matching end. Markers are compiler barriers, so the measured code
 * stays between them. On other architectures they compile to nothing.
 *
 * A phase known at compile time may be 0..KLOC_MARK_PHASE_COUNT - 1
 * (KLOC_MARK_START_CONST()); the functions take a run-time phase of
 * 0..KLOC_MARK_PHASES - 1 and ignore any other.
 *
 * The protocol, declared here once for the guest and the plugin (which
 * includes this file): a 12-bit payload, the kind in bits 11..8 and the
 * phase in bits 7..0, under a magic of its own on each architecture: bits
 * 31..16 of the x86_64 disp32 (bits 15..12 zero), bits 15..12 of the arm64
 * imm16. Anything else is not a marker, or a bad one.
 */
#ifndef KLOC_MARKER_H
#define KLOC_MARKER_H

#include <assert.h>	/* static_assert */

#define KLOC_MARK_MAGIC		0x4b4cU	/* "KL", x86_64 disp32 bits 31..16 */
#define KLOC_MARK_MAGIC_A64	0xbU	/* arm64 imm16 bits 15..12 */
#define KLOC_MARK_KIND_START	1U
#define KLOC_MARK_KIND_END	2U
#define KLOC_MARK_PHASE_COUNT	256U	/* phases 0..255 */
#define KLOC_MARK_PHASES	16U	/* those kloc_mark_start() takes at run time */
#define KLOC_MARK_PAYLOAD(kind, phase)	(((kind) << 8) | ((phase) & 0xffU))
#define KLOC_MARK_KIND(payload)		(((payload) >> 8) & 0xfU)
#define KLOC_MARK_PHASE(payload)	((payload) & 0xffU)
/* The marker's immediate: x86_64 disp32, arm64 imm16. */
#define KLOC_MARK_IMM_X86(kind, phase)					\
	((KLOC_MARK_MAGIC << 16) | KLOC_MARK_PAYLOAD(kind, phase))
#define KLOC_MARK_IMM_A64(kind, phase)					\
	((KLOC_MARK_MAGIC_A64 << 12) | KLOC_MARK_PAYLOAD(kind, phase))

/*
 * The lo_counters kselftest's windows. The one place they are numbered:
 * kloc reads these two lines for the counted figures (kloc/counting/counts.py).
 */
#define KLOC_PHASE_SINGLE	1U	/* one thread */
#define KLOC_PHASE_ALL		2U	/* one thread per CPU */

/*
 * A constant phase past the payload's 8 bits would mark another phase:
 * each KLOC_MARK_CONST() names its phase kloc_mark_phase and checks it.
 */
#define KLOC_MARK_PHASE_OK	(kloc_mark_phase < KLOC_MARK_PHASE_COUNT)
#define KLOC_MARK_RANGE		"kloc marker phase out of range"

#if defined(__x86_64__)
#define KLOC_MARK_CONST(kind, phase)					\
	({								\
		enum { kloc_mark_phase = (phase) };			\
		static_assert(KLOC_MARK_PHASE_OK, KLOC_MARK_RANGE);	\
		__asm__ __volatile__(".byte 0x0f, 0x1f, 0x80\n\t.long %c0"	\
				     : : "i" (KLOC_MARK_IMM_X86(kind, kloc_mark_phase))	\
				     : "memory");			\
	})
#elif defined(__aarch64__)
#define KLOC_MARK_CONST(kind, phase)					\
	({								\
		enum { kloc_mark_phase = (phase) };			\
		static_assert(KLOC_MARK_PHASE_OK, KLOC_MARK_RANGE);	\
		__asm__ __volatile__(".inst 0xd2e0001f | (%c0 << 5)"	\
				     : : "i" (KLOC_MARK_IMM_A64(kind, kloc_mark_phase))	\
				     : "memory");			\
	})
#else
#define KLOC_MARK_CONST(kind, phase)					\
	do {								\
		enum { kloc_mark_phase = (phase) };			\
		static_assert(KLOC_MARK_PHASE_OK, KLOC_MARK_RANGE);	\
		(void)(kind);						\
	} while (0)
#endif

#define KLOC_MARK_START_CONST(phase)	KLOC_MARK_CONST(KLOC_MARK_KIND_START, phase)
#define KLOC_MARK_END_CONST(phase)	KLOC_MARK_CONST(KLOC_MARK_KIND_END, phase)

/* Start counting phase (0..15): one no-op instruction. */
static inline void kloc_mark_start(unsigned int phase)
{
	switch (phase) {
	case 0:
		KLOC_MARK_START_CONST(0);
		break;
	case 1:
		KLOC_MARK_START_CONST(1);
		break;
	case 2:
		KLOC_MARK_START_CONST(2);
		break;
	case 3:
		KLOC_MARK_START_CONST(3);
		break;
	case 4:
		KLOC_MARK_START_CONST(4);
		break;
	case 5:
		KLOC_MARK_START_CONST(5);
		break;
	case 6:
		KLOC_MARK_START_CONST(6);
		break;
	case 7:
		KLOC_MARK_START_CONST(7);
		break;
	case 8:
		KLOC_MARK_START_CONST(8);
		break;
	case 9:
		KLOC_MARK_START_CONST(9);
		break;
	case 10:
		KLOC_MARK_START_CONST(10);
		break;
	case 11:
		KLOC_MARK_START_CONST(11);
		break;
	case 12:
		KLOC_MARK_START_CONST(12);
		break;
	case 13:
		KLOC_MARK_START_CONST(13);
		break;
	case 14:
		KLOC_MARK_START_CONST(14);
		break;
	case 15:
		KLOC_MARK_START_CONST(15);
		break;
	default:
		break;
	}
}

/* End counting phase (0..15). */
static inline void kloc_mark_end(unsigned int phase)
{
	switch (phase) {
	case 0:
		KLOC_MARK_END_CONST(0);
		break;
	case 1:
		KLOC_MARK_END_CONST(1);
		break;
	case 2:
		KLOC_MARK_END_CONST(2);
		break;
	case 3:
		KLOC_MARK_END_CONST(3);
		break;
	case 4:
		KLOC_MARK_END_CONST(4);
		break;
	case 5:
		KLOC_MARK_END_CONST(5);
		break;
	case 6:
		KLOC_MARK_END_CONST(6);
		break;
	case 7:
		KLOC_MARK_END_CONST(7);
		break;
	case 8:
		KLOC_MARK_END_CONST(8);
		break;
	case 9:
		KLOC_MARK_END_CONST(9);
		break;
	case 10:
		KLOC_MARK_END_CONST(10);
		break;
	case 11:
		KLOC_MARK_END_CONST(11);
		break;
	case 12:
		KLOC_MARK_END_CONST(12);
		break;
	case 13:
		KLOC_MARK_END_CONST(13);
		break;
	case 14:
		KLOC_MARK_END_CONST(14);
		break;
	case 15:
		KLOC_MARK_END_CONST(15);
		break;
	default:
		break;
	}
}

#endif /* KLOC_MARKER_H */
