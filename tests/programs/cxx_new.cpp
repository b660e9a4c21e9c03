/*
 * cxx_new.cpp - C++ allocation through operator new and delete in their forms,
 * for tests/cli/. libstdc++ forwards them to malloc / aligned_alloc / free,
 * so the recorder sees them there with these functions on the stack.
 *
 *   new Obj24            4 x 24 bytes, deleted        (make_objects)
 *   new char[333]        3 x 333 bytes, delete[]      (make_arrays)
 *   new Aligned64        2 x 192 bytes, align 64      (make_aligned)
 *   new (nothrow) Obj24  1 x 24 bytes, deleted        (make_nothrow)
 *   failed new           1 (bad_alloc caught)         (make_failed)
 *   leaked new Obj24     2 x 24 bytes                 (make_leak)
 */
#include <cstdint>
#include <cstdlib>
#include <new>

#include "prog.h"

struct Obj24 {
	long a, b, c;
};
static_assert(sizeof(Obj24) == 24, "Obj24 size");

struct alignas(64) Aligned64 {
	char bytes[192];
};
static_assert(sizeof(Aligned64) == 192, "Aligned64 size");

static volatile size_t huge_count = (size_t)1 << 61;

NOINLINE static void make_objects()
{
	for (int i = 0; i < 4; i++) {
		Obj24 *o = new Obj24(); /* @make_objects */
		prog_sink(o);
		delete o;
	}
}

NOINLINE static void make_arrays()
{
	for (int i = 0; i < 3; i++) {
		char *a = new char[333]; /* @make_arrays */
		prog_sink(a);
		delete[] a;
	}
}

NOINLINE static void make_aligned()
{
	for (int i = 0; i < 2; i++) {
		Aligned64 *a = new Aligned64(); /* @make_aligned */
		PROG_CHECK(((uintptr_t)a & 63) == 0);
		prog_sink(a);
		delete a;
	}
}

NOINLINE static void make_nothrow()
{
	Obj24 *o = new (std::nothrow) Obj24();
	PROG_CHECK(o);
	prog_sink(o);
	delete o;
}

NOINLINE static void make_failed()
{
	bool thrown = false;
	try {
		char *a = new char[huge_count]; /* @make_failed */
		prog_sink(a);
	} catch (const std::bad_alloc &) {
		thrown = true;
	}
	PROG_CHECK(thrown);
}

NOINLINE static void make_leak()
{
	for (int i = 0; i < 2; i++)
		prog_sink(new Obj24()); /* @make_leak */
}

int main()
{
	make_objects();
	make_arrays();
	make_aligned();
	make_nothrow();
	make_failed();
	make_leak();
	return 0;
}
