/* A known call chain main -> level_a -> level_b -> level_c -> malloc(11001). */
#include <stdlib.h>

__attribute__((noinline)) void *level_c(void)
{
	void *p = malloc(11001);
	return p;
}
__attribute__((noinline)) void *level_b(void)
{
	void *p = level_c();
	return p;
}
__attribute__((noinline)) void *level_a(void)
{
	void *p = level_b();
	return p;
}

int main(void)
{
	free(level_a());
	return 0;
}
