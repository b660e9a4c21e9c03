/* churn N [SIZE]: N malloc/free pairs of SIZE bytes (default 100), then
   prints "churned N" and exits 0. A known amount of events. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 100;
	long sum = 0;
	for (long i = 0; i < n; i++) {
		char *p = malloc(size);
		p[0] = 1;
		sum += p[0];
		free(p);
	}
	printf("churned %ld\n", sum);
	return 0;
}
