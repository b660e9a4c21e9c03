// hello_cxx.cpp - a C++ hello world that frees everything it allocates: the
// leak gate must pass it with the built-in suppressions (libstdc++'s
// emergency pool, stdout's buffer) and fail it without them.
#include <iostream>

int main()
{
	std::cout << "hello" << std::endl;
	return 0;
}
