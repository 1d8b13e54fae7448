/* Event producer for the streaming benchmark: after a line on stdin, N
 * getppid() calls (bench.bpf.c emits a burst of events for each). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	char line[16];

	if (!fgets(line, sizeof(line), stdin))
		return 1;
	for (long i = 0; i < n; i++)
		getppid();
	return 0;
}
