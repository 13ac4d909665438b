#include "fake.h"
#include "../loop.h"
#include <stdatomic.h>
#include <stddef.h>

static struct {
	_Atomic uint64_t used, reserved;
	_Atomic int ret_v2, ret_v1;
	_Atomic uint64_t calls_v2, calls_v1;
} gpus[FAKE_GPUS];

static int idx(void *h) {
	uintptr_t i = (uintptr_t)h;
	return i >= 1 && i <= FAKE_GPUS ? (int)i - 1 : -1;
}

void fake_set(int dev, uint64_t used, uint64_t reserved, int ret_v2, int ret_v1) {
	gpus[dev].used = used;
	gpus[dev].reserved = reserved;
	gpus[dev].ret_v2 = ret_v2;
	gpus[dev].ret_v1 = ret_v1;
}

uint64_t fake_calls(int dev, int v1) { return v1 ? gpus[dev].calls_v1 : gpus[dev].calls_v2; }

static int get_v2(void *h, gt_memory_v2 *m) {
	int i = idx(h);
	if (i < 0)
		return 2; // NVML_ERROR_INVALID_ARGUMENT
	gpus[i].calls_v2++;
	if (m->version != ((unsigned int)sizeof *m | (2u << 24)))
		return 25; // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
	if (gpus[i].ret_v2)
		return gpus[i].ret_v2;
	m->used = gpus[i].used;
	m->reserved = gpus[i].reserved;
	m->total = 1ull << 40;
	return 0;
}

static int get_v1(void *h, gt_memory_v1 *m) {
	int i = idx(h);
	if (i < 0)
		return 2;
	gpus[i].calls_v1++;
	if (gpus[i].ret_v1)
		return gpus[i].ret_v1;
	m->used = gpus[i].used;
	m->total = 1ull << 40;
	return 0;
}

static int by_index(unsigned int i, void **h) {
	if (i >= FAKE_GPUS)
		return 2;
	*h = (void *)(uintptr_t)(i + 1);
	return 0;
}

static int by_index_failing(unsigned int i, void **h) {
	(void)i;
	*h = NULL;
	return 999; // NVML_ERROR_UNKNOWN
}

uintptr_t fake_by_index_failing(void) { return (uintptr_t)by_index_failing; }
uintptr_t fake_get_v2(void) { return (uintptr_t)get_v2; }
uintptr_t fake_get_v1(void) { return (uintptr_t)get_v1; }
uintptr_t fake_by_index(void) { return (uintptr_t)by_index; }
