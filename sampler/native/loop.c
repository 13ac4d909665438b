#define _GNU_SOURCE
#include "loop.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// NVML return codes the loop acts on.
enum { NVML_SUCCESS = 0, NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_FUNCTION_NOT_FOUND = 13 };

// Beyond this many periods behind (a descheduled thread, a slow call) the
// loop starts afresh instead of sampling back to back to catch up.
#define MAX_LAG_TICKS 5

typedef struct {
	void *h;
	int v1;
	int64_t retry_at; // CLOCK_MONOTONIC ns; while failing, not read before this
	_Atomic uint64_t head; // written by the thread
	_Atomic uint64_t tail; // written by the drainer
	gt_sample ring[GT_RING];
} gt_dev;

struct gt_loop {
	int n;
	gt_dev *devs;
	gt_get_v2 get_v2;
	gt_get_v1 get_v1;
	int64_t period, retry;
	_Atomic uint64_t dropped;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond; // signalled by gt_stop, so a long period does not delay it
	int stop;            // guarded by mu
};

static int64_t now_ns(clockid_t c) {
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int read_dev(gt_loop *l, gt_dev *d, gt_sample *s) {
	if (!d->v1 && l->get_v2) {
		gt_memory_v2 m;
		memset(&m, 0, sizeof m);
		m.version = (unsigned int)sizeof m | (2u << 24);
		int r = l->get_v2(d->h, &m);
		if (r == NVML_SUCCESS) {
			s->used = m.used;
			s->reserved = m.reserved;
			return r;
		}
		if ((r != NVML_ERROR_NOT_SUPPORTED && r != NVML_ERROR_FUNCTION_NOT_FOUND) || !l->get_v1)
			return r;
		d->v1 = 1; // for good, as the Go sampler does
	}
	gt_memory_v1 m;
	memset(&m, 0, sizeof m);
	int r = l->get_v1(d->h, &m);
	s->used = m.used;
	s->reserved = 0;
	s->v1 = 1;
	return r;
}

static void tick(gt_loop *l, int64_t mono) {
	for (int i = 0; i < l->n; i++) {
		gt_dev *d = &l->devs[i];
		if (!d->h || mono < d->retry_at)
			continue;
		gt_sample s;
		memset(&s, 0, sizeof s);
		s.ret = read_dev(l, d, &s);
		s.t = now_ns(CLOCK_REALTIME);
		// a failing GPU (lost, resetting) can make each call slow: try it
		// again later rather than at the full rate
		d->retry_at = s.ret == NVML_SUCCESS ? 0 : mono + l->retry;
		uint64_t h = atomic_load_explicit(&d->head, memory_order_relaxed);
		if (h - atomic_load_explicit(&d->tail, memory_order_acquire) >= GT_RING) {
			atomic_fetch_add_explicit(&l->dropped, 1, memory_order_relaxed);
			continue;
		}
		d->ring[h % GT_RING] = s;
		atomic_store_explicit(&d->head, h + 1, memory_order_release);
	}
}

static void *run(void *arg) {
	gt_loop *l = arg;
	// Signals are Go's business; this thread never takes one.
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_setname_np(pthread_self(), "gputop-nvml"); // as top -H and ps -L show it
	int64_t next = now_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		pthread_mutex_unlock(&l->mu);
		int64_t mono = now_ns(CLOCK_MONOTONIC);
		tick(l, mono);
		// absolute deadlines: a late wake-up shortens the next wait
		// instead of slowing the rate
		next += l->period;
		mono = now_ns(CLOCK_MONOTONIC);
		if (mono - next > MAX_LAG_TICKS * l->period)
			next = mono;
		struct timespec ts = {.tv_sec = next / 1000000000, .tv_nsec = next % 1000000000};
		pthread_mutex_lock(&l->mu);
		while (!l->stop && pthread_cond_timedwait(&l->cond, &l->mu, &ts) != ETIMEDOUT) {
		}
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

gt_loop *gt_start(int n, uintptr_t *handles, int *v1, uintptr_t get_v2, uintptr_t get_v1,
		int64_t period_ns, int64_t retry_ns, int *err) {
	gt_loop *l = calloc(1, sizeof *l);
	gt_dev *devs = n > 0 ? calloc((size_t)n, sizeof *devs) : NULL;
	if (!l || (n > 0 && !devs)) {
		free(l);
		free(devs);
		*err = ENOMEM;
		return NULL;
	}
	l->n = n;
	l->devs = devs;
	for (int i = 0; i < n; i++) {
		devs[i].h = (void *)handles[i];
		devs[i].v1 = v1[i] || !get_v2;
	}
	l->get_v2 = (gt_get_v2)get_v2;
	l->get_v1 = (gt_get_v1)get_v1;
	l->period = period_ns > 0 ? period_ns : 1;
	l->retry = retry_ns;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&l->mu, NULL);
	int r = pthread_create(&l->thread, NULL, run, l);
	if (r != 0) {
		pthread_cond_destroy(&l->cond);
		pthread_mutex_destroy(&l->mu);
		free(devs);
		free(l);
		*err = r;
		return NULL;
	}
	return l;
}

int gt_drain(gt_loop *l, int dev, gt_sample *out, int max) {
	if (dev < 0 || dev >= l->n || max <= 0)
		return 0;
	gt_dev *d = &l->devs[dev];
	uint64_t t = atomic_load_explicit(&d->tail, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&d->head, memory_order_acquire);
	int k = 0;
	for (; t + k < h && k < max; k++)
		out[k] = d->ring[(t + k) % GT_RING];
	atomic_store_explicit(&d->tail, t + k, memory_order_release);
	return k;
}

uint64_t gt_dropped(gt_loop *l) { return atomic_load_explicit(&l->dropped, memory_order_relaxed); }

void gt_stop(gt_loop *l) {
	pthread_mutex_lock(&l->mu);
	l->stop = 1;
	pthread_cond_signal(&l->cond);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->thread, NULL);
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->mu);
	free(l->devs);
	free(l);
}

int gt_lookup(uintptr_t *get_v2, uintptr_t *get_v1, uintptr_t *by_index, char *msg, int msglen) {
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!lib) {
		snprintf(msg, (size_t)msglen, "libnvidia-ml.so.1 is not loaded");
		return -1;
	}
	*get_v2 = (uintptr_t)dlsym(lib, "nvmlDeviceGetMemoryInfo_v2"); // absent before R510
	*get_v1 = (uintptr_t)dlsym(lib, "nvmlDeviceGetMemoryInfo");
	*by_index = (uintptr_t)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
	dlclose(lib); // go-nvml's reference keeps it loaded
	if (!*get_v1 || !*by_index) {
		snprintf(msg, (size_t)msglen, "libnvidia-ml.so.1 lacks nvmlDeviceGetMemoryInfo or nvmlDeviceGetHandleByIndex_v2");
		return -1;
	}
	return 0;
}

int gt_handle(uintptr_t by_index, unsigned int index, uintptr_t *handle) {
	void *h = NULL;
	int r = ((gt_handle_by_index)by_index)(index, &h);
	*handle = (uintptr_t)h;
	return r;
}
