// nvml_rss: what NVML costs a process in memory before it samples anything,
// and what each query gputop makes costs in time. Prints RSS and whether
// libcuda is mapped after each step (anonymous memory and files' pages
// apart); then the mean time per call.
//   gcc -O2 -o bin/nvml_rss bench/probe/nvml_rss.c -ldl && bin/nvml_rss
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } mem2_t;
typedef struct { unsigned long long total, free, used; } mem1_t;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } pinfo_t;
static void state(const char *what) {
  FILE *f = fopen("/proc/self/maps", "r"); char line[512]; int cuda = 0;
  while (fgets(line, sizeof line, f)) if (strstr(line, "libcuda")) cuda = 1;
  fclose(f);
  f = fopen("/proc/self/status", "r"); long rss = 0, anon = 0, file = 0;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "VmRSS:", 6)) rss = atol(line + 6);
    if (!strncmp(line, "RssAnon:", 8)) anon = atol(line + 8);
    if (!strncmp(line, "RssFile:", 8)) file = atol(line + 8);
  }
  fclose(f);
  printf("%-40s libcuda %s  RSS %ld kB (anonymous %ld, files %ld)\n", what, cuda ? "LOADED" : "no", rss, anon, file);
}
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(void) {
  state("start");
  void *h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_GLOBAL); state("dlopen nvml");
  int (*init)(void) = dlsym(h, "nvmlInit_v2"); init(); state("nvmlInit_v2");
  void *dev; int (*byidx)(unsigned, void **) = dlsym(h, "nvmlDeviceGetHandleByIndex_v2"); byidx(0, &dev); state("GetHandleByIndex_v2");
  char buf[256]; int (*name)(void *, char *, unsigned) = dlsym(h, "nvmlDeviceGetName"); name(dev, buf, sizeof buf); state("GetName");
  int (*uuid)(void *, char *, unsigned) = dlsym(h, "nvmlDeviceGetUUID"); uuid(dev, buf, sizeof buf); state("GetUUID");
  mem1_t m1; int (*g1)(void *, mem1_t *) = dlsym(h, "nvmlDeviceGetMemoryInfo"); g1(dev, &m1); state("GetMemoryInfo");
  mem2_t m2; memset(&m2, 0, sizeof m2); m2.version = sizeof m2 | 2u << 24;
  int (*g2)(void *, mem2_t *) = dlsym(h, "nvmlDeviceGetMemoryInfo_v2"); g2(dev, &m2); state("GetMemoryInfo_v2");
  pinfo_t p[64]; unsigned n = 64;
  int (*cp)(void *, unsigned *, pinfo_t *) = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3"); if (cp) { cp(dev, &n, p); state("GetComputeRunningProcesses_v3"); }
  n = 64; int (*gp)(void *, unsigned *, pinfo_t *) = dlsym(h, "nvmlDeviceGetGraphicsRunningProcesses_v3"); if (gp) { gp(dev, &n, p); state("GetGraphicsRunningProcesses_v3"); }
  double t0 = now(); for (int i = 0; i < 20000; i++) g1(dev, &m1); double t1 = now();
  for (int i = 0; i < 20000; i++) { m2.version = sizeof m2 | 2u << 24; g2(dev, &m2); } double t2 = now();
  for (int i = 0; i < 2000; i++) { n = 64; cp(dev, &n, p); } double t3 = now();
  printf("per call: GetMemoryInfo %.2f us, GetMemoryInfo_v2 %.2f us, GetComputeRunningProcesses_v3 %.2f us\n",
         (t1 - t0) / 20000 * 1e6, (t2 - t1) / 20000 * 1e6, (t3 - t2) / 2000 * 1e6);
  return 0;
}
