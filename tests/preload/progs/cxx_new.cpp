// C++ new/delete arrive through malloc/free: the innermost frame of the
// stack is operator new in libstdc++, the next one the caller.
#include <cstdlib>
#include <string>

__attribute__((noinline)) static int *make(void)
{
	return new int[3000];
}

int main()
{
	int *p = make();
	p[0] = 1;
	delete[] p;
	std::string *s = nullptr;
	(void)s;
	return 0;
}
