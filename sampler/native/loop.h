// A native sampling loop: one POSIX thread calls NVML's memory query for
// every GPU at a fixed rate and leaves the readings in one ring per GPU,
// which Go drains a few dozen times a second. The Go runtime is not woken
// per sample, which at 1 kHz is most of what sampling costs.
#ifndef GPUTOP_LOOP_H
#define GPUTOP_LOOP_H

#include <stdint.h>

// nvmlMemory_v2_t and nvmlMemory_t, as nvml.h lays them out.
typedef struct {
	unsigned int version;
	unsigned long long total, reserved, free, used;
} gt_memory_v2;

typedef struct {
	unsigned long long total, free, used;
} gt_memory_v1;

typedef int (*gt_get_v2)(void *device, gt_memory_v2 *m);
typedef int (*gt_get_v1)(void *device, gt_memory_v1 *m);
typedef int (*gt_handle_by_index)(unsigned int index, void **device);

// One reading. ret is the nvmlReturn_t of the call; used and reserved are
// meaningful only when it is 0 (NVML_SUCCESS).
typedef struct {
	int64_t t; // CLOCK_REALTIME, ns
	uint64_t used, reserved;
	int32_t ret;
	int32_t v1; // read with the v1 query (reserved unknown)
} gt_sample;

// GT_RING readings per GPU: 4 s at 1 kHz, far more than Go's drain interval.
#define GT_RING 4096

typedef struct gt_loop gt_loop;

// gt_start starts the thread. handles[i] is GPU i's nvmlDevice_t (NULL: not
// sampled); v1[i] starts it on the v1 query. get_v2 may be NULL (an old
// driver), then every GPU uses get_v1. Returns NULL and sets *err (an errno)
// when the thread cannot be made.
gt_loop *gt_start(int n, uintptr_t *handles, int *v1, uintptr_t get_v2, uintptr_t get_v1,
		int64_t period_ns, int64_t retry_ns, int *err);

// gt_drain moves up to max of GPU dev's readings, oldest first, into out.
int gt_drain(gt_loop *l, int dev, gt_sample *out, int max);

// gt_dropped counts readings lost because a ring was full.
uint64_t gt_dropped(gt_loop *l);

// gt_stop ends the thread, waits for it and frees the loop.
void gt_stop(gt_loop *l);

// gt_lookup finds the NVML functions in the already loaded libnvidia-ml.so.1
// (loaded by go-nvml); it never loads the library itself. Returns 0, or -1
// with a message in msg.
int gt_lookup(uintptr_t *get_v2, uintptr_t *get_v1, uintptr_t *by_index, char *msg, int msglen);

// gt_handle calls nvmlDeviceGetHandleByIndex_v2 through the given pointer.
int gt_handle(uintptr_t by_index, unsigned int index, uintptr_t *handle);

#endif
