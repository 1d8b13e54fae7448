/* Benchmark workload for tools/bench/ebpf_bench.py: after a line on stdin
 * ("go", once the probes are attached), N one-byte read()s of /dev/zero;
 * prints the CPU time (user+sys, where BPF programs are charged) per read
 * in ns. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	char c, line[16];
	struct timespec a, b;
	int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);

	if (fd < 0 || !fgets(line, sizeof(line), stdin))
		return 1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	for (long i = 0; i < n; i++)
		if (read(fd, &c, 1) != 1)
			return 1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return 0;
}
