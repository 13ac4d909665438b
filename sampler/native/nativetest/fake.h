// Stand-ins for NVML's memory functions, for tests on machines without a
// driver: they return what the test set for each handle (1 + GPU index).
#ifndef GPUTOP_FAKE_H
#define GPUTOP_FAKE_H
#include <stdint.h>
#define FAKE_GPUS 8
void fake_set(int dev, uint64_t used, uint64_t reserved, int ret_v2, int ret_v1);
uint64_t fake_calls(int dev, int v1);
uintptr_t fake_get_v2(void);
uintptr_t fake_get_v1(void);
uintptr_t fake_by_index(void);
uintptr_t fake_by_index_failing(void);
#endif
