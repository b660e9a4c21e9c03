/*
 * The collector's demangler (ht__demangle in src/session/symbolize.c): C++
 * through the C++ runtime, Rust's legacy and v0 names through libiberty,
 * anything else left alone.
 */
#include <stdlib.h>

#include "check.h"
#include "session/internal.h"

static void expect(const char *mangled, const char *want)
{
	char *got = ht__demangle(mangled);
	if (want ? !got || strcmp(got, want) : got != NULL) {
		fprintf(stderr, "demangle %s: got '%s', want '%s'\n", mangled, got ? got : "(none)",
			want ? want : "(none)");
		check_failures++;
	}
	free(got);
}

int main(void)
{
	/* C++ */
	expect("_Znwm", "operator new(unsigned long)");
	expect("_ZNSt6vectorIiSaIiEE9push_backERKi",
	       "std::vector<int, std::allocator<int> >::push_back(int const&)");
	/* Rust legacy: the hash is dropped, $LT$ and friends decoded. */
	expect("_ZN4core3fmt5write17h2b1c1b8c4e5f6a7bE", "core::fmt::write");
	expect("_ZN5alloc7raw_vec19RawVec$LT$T$C$A$GT$8grow_one17h0123456789abcdefE",
	       "alloc::raw_vec::RawVec<T,A>::grow_one");
	/* Rust v0 */
	expect("_RNvCs15kBYyAo9fc_7mycrate4main", "mycrate::main");
	expect("_RNvNtCs1234_5alloc7raw_vec11finish_grow", "alloc::raw_vec::finish_grow");
	/* Not mangled, or not valid. */
	expect("main", NULL);
	expect("_R", NULL);
	expect("_Zfoo", NULL);
	expect(NULL, NULL);
	CHECK_DONE();
}
