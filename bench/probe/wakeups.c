// wakeups MODE SECONDS: the CPU cost of a 1 kHz loop written in C, for
// comparison with Go's (bench/cmd/wakeloop). MODE sleep: clock_nanosleep only;
// nvml: plus one nvmlDeviceGetMemoryInfo_v2 per GPU per tick.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } mem2_t;
static double cpu(void){struct rusage r;getrusage(RUSAGE_SELF,&r);return r.ru_utime.tv_sec+r.ru_utime.tv_usec/1e6+r.ru_stime.tv_sec+r.ru_stime.tv_usec/1e6;}
static double mono(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  const char*mode=argc>1?argv[1]:"sleep"; int secs=argc>2?atoi(argv[2]):10;
  int (*getmem)(void*,mem2_t*)=0; void*dev[8]; unsigned n=0;
  if(!strcmp(mode,"nvml")){
    void*h=dlopen("libnvidia-ml.so.1",RTLD_NOW); if(!h){fprintf(stderr,"%s\n",dlerror());return 1;}
    int(*init)(void)=dlsym(h,"nvmlInit_v2"); int(*count)(unsigned*)=dlsym(h,"nvmlDeviceGetCount_v2");
    int(*byidx)(unsigned,void**)=dlsym(h,"nvmlDeviceGetHandleByIndex_v2"); getmem=dlsym(h,"nvmlDeviceGetMemoryInfo_v2");
    if(init()||count(&n)){fprintf(stderr,"nvml init failed\n");return 1;} if(n>8)n=8;
    for(unsigned i=0;i<n;i++) byidx(i,&dev[i]);
  }
  struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); double c0=cpu(), w0=mono(); long ticks=0; unsigned long long sink=0;
  while(mono()-w0<secs){
    for(unsigned i=0;i<n;i++){mem2_t m; memset(&m,0,sizeof m); m.version=sizeof(mem2_t)|(2u<<24); getmem(dev[i],&m); sink+=m.used;}
    ticks++; t.tv_nsec+=1000000; if(t.tv_nsec>=1000000000){t.tv_nsec-=1000000000;t.tv_sec++;}
    clock_nanosleep(CLOCK_MONOTONIC,TIMER_ABSTIME,&t,0);
  }
  double el=mono()-w0; printf("c-%s: %.1f ticks/s, cpu %.2f%% of a core (sink %llu)\n",mode,ticks/el,100*(cpu()-c0)/el,sink&1);
  return 0;
}
