/* The CPU floor of a camera-shaped loop on this machine: one CLOCK_MONOTONIC
 * timerfd at the frame rate in an epoll, each tick read, nothing else -- no
 * sits, no Python. chain_bench.py prints it beside every path's CPU per
 * frame (a sandboxed kernel such as gVisor makes a wake-up cost tens of µs).
 *
 *     cc -O2 -o wake_floor wake_floor.c && ./wake_floor FPS SECONDS
 *
 * Prints one JSON object: the ticks, CPU µs per tick (user + system), and
 * the wake-up's lateness after the tick (p50/p99 µs).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static int64_t ns(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

static double cpu_us(void)
{
	struct rusage r;
	getrusage(RUSAGE_SELF, &r);
	return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
}

static int cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: wake_floor FPS SECONDS\n");
		return 2;
	}
	double fps = atof(argv[1]), seconds = atof(argv[2]);
	int64_t period = (int64_t)(1e9 / fps);
	long n = (long)(fps * seconds);
	int64_t *late = calloc(n, sizeof *late);
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = tfd};
	if (!late || tfd < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev)) {
		perror("wake_floor");
		return 1;
	}
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int64_t first = ns(t0) + period;
	struct itimerspec its = {
		.it_value = {first / 1000000000, first % 1000000000},
		.it_interval = {period / 1000000000, period % 1000000000},
	};
	timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
	double c0 = cpu_us();
	int64_t ticks = 0;
	long woken = 0;
	while (woken < n) {
		if (epoll_wait(ep, &ev, 1, -1) != 1)
			continue;
		uint64_t k;
		if (read(tfd, &k, sizeof k) != sizeof k)
			continue;
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		ticks += (int64_t)k;
		late[woken++] = ns(t) - (first + (ticks - 1) * period);
	}
	double spent = cpu_us() - c0;
	qsort(late, n, sizeof *late, cmp);
	printf("{\"fps\": %g, \"wakes\": %ld, \"ticks\": %lld, \"cpu_us_per_frame\": %.1f, "
	       "\"wake_late_us\": {\"p50\": %.1f, \"p99\": %.1f}}\n",
	       fps, woken, (long long)ticks, spent / woken, late[n / 2] / 1e3, late[(n * 99) / 100] / 1e3);
	return 0;
}
